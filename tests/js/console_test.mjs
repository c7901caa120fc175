// Drives the web console of `ringfence serve` in Debian's chromium (headless,
// through puppeteer-core): opens the page with a token, waits for a sandbox
// to appear with what it uses now, shows a process's and a call's output,
// searches, lists the audit events, approves a pending request by clicking,
// kills a sandbox, saves a screenshot.
// Prints one JSON object per step for tests/integration/console_test.cc.
//
//   node console_test.mjs --url URL --token T --sandbox ID --approval N --search TEXT --screenshot PATH
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, 'npm', 'node_modules', 'x.js'));
const puppeteer = (await import(require.resolve('puppeteer-core'))).default;
const args = process.argv.slice(2);
const opt = (name) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : undefined; };
const say = (step, value = {}) => console.log(JSON.stringify({ step, ...value }));

const browser = await puppeteer.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  // Root in CI: chromium's own sandbox needs an unprivileged user.
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run'],
});
try {
  const page = await browser.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  const external = [];
  page.on('request', (r) => { if (!r.url().startsWith(opt('--url'))) external.push(r.url()); });
  await page.setViewport({ width: 1280, height: 800 });
  await page.goto(opt('--url') + '/#token=' + opt('--token'), { waitUntil: 'domcontentloaded' });
  await page.waitForSelector('#status.live', { timeout: 15000 });
  say('live', { url: page.url() });
  await page.waitForSelector(`#sandboxes tr[data-id="${opt('--sandbox')}"]`, { timeout: 15000 });
  const sb = opt('--sandbox');
  // What it uses now comes with its worker's next heartbeat.
  // (CPU needs two heartbeats: it is a share over the time between them.)
  await page.waitForFunction((id) => {
    const mem = document.querySelector(`td[data-memory="${id}"]`);
    const cpu = document.querySelector(`td[data-cpu="${id}"]`);
    return mem && cpu && !mem.textContent.startsWith('-') && !cpu.textContent.startsWith('-');
  }, { timeout: 15000 }, sb);
  const row = await page.$eval(`#sandboxes tr[data-id="${sb}"]`, (tr) => [...tr.cells].map((c) => c.textContent));
  say('sandbox', { row });
  // A background process's output, from its row's Processes.
  await page.click(`button[data-processes="${sb}"]`);
  await page.waitForSelector('#processes tr[data-pid]', { timeout: 15000 });
  await page.click('#processes button[data-follow]');
  await page.waitForFunction(() => document.querySelector('#output').textContent.includes('hello from a process'), { timeout: 15000 });
  say('process_output', { text: await page.$eval('#output', (p) => p.textContent) });
  // A call's output, from the calls table.
  await page.waitForSelector('#calls tr[data-call] button[data-output]', { timeout: 15000 });
  const call = await page.$eval('#calls tr[data-call]', (tr) => [...tr.cells].map((c) => c.textContent));
  say('call', { row: call });
  await page.click('#calls tr[data-call] button[data-output]');
  await page.waitForFunction(() => document.querySelector('#output').textContent.includes('call says hi'), { timeout: 15000 });
  say('call_output', { text: await page.$eval('#output', (p) => p.textContent) });
  // Search: the other sandbox's row is filtered out, this one stays.
  await page.type('#search', opt('--search'));
  const hidden = await page.$$eval('#sandboxes tbody tr', (rows) => rows.map((r) => [r.dataset.id, r.classList.contains('filtered')]));
  say('search', { rows: hidden });
  await page.$eval('#search', (i) => { i.value = ''; i.dispatchEvent(new Event('input')); });
  // The audit events themselves.
  await page.waitForSelector('#events tr[data-seq]', { timeout: 15000 });
  const kinds = await page.$$eval('#events tr[data-seq]', (rows) => rows.map((r) => r.cells[2].textContent));
  say('events', { kinds });
  const approve = `button[data-approve="${opt('--approval')}"]`;
  await page.waitForSelector(approve, { timeout: 15000 });
  const request = await page.$eval(`tr[data-approval="${opt('--approval')}"]`, (tr) => tr.cells[2].textContent);
  const approvalRow = await page.$eval(`tr[data-approval="${opt('--approval')}"]`, (tr) => [...tr.cells].map((c) => c.textContent));
  say('request', { text: request, row: approvalRow });
  await page.screenshot({ path: opt('--screenshot'), fullPage: true });
  await page.click(approve);
  await page.waitForSelector(`tr[data-approval="${opt('--approval')}"]`, { hidden: true, timeout: 15000 });
  say('approved');
  // Kill an API sandbox from its row (issue 41): the row goes with it.
  await page.click(`button[data-kill="${opt('--sandbox')}"]`);
  await page.waitForSelector(`#sandboxes tr[data-id="${opt('--sandbox')}"]`, { hidden: true, timeout: 15000 });
  say('killed');
  const audit = await page.$eval('#audit', (d) => d.textContent);
  say('audit', { text: audit });
  say('screenshot', { path: opt('--screenshot') });
  say('done', { errors, external });
} catch (e) {
  say('error', { message: String(e && e.stack || e) });
  process.exitCode = 1;
} finally {
  await browser.close();
}
