// Drives the web console of `ringfence serve` in Debian's chromium (headless,
// through puppeteer-core): opens the page with a token, waits for a sandbox
// to appear, approves a pending request by clicking, saves a screenshot.
// Prints one JSON object per step for tests/integration/console_test.cc.
//
//   node console_test.mjs --url URL --token T --sandbox ID --approval N --screenshot PATH
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
  const row = await page.$eval(`#sandboxes tr[data-id="${opt('--sandbox')}"]`, (tr) => [...tr.cells].map((c) => c.textContent));
  say('sandbox', { row });
  const approve = `button[data-approve="${opt('--approval')}"]`;
  await page.waitForSelector(approve, { timeout: 15000 });
  const request = await page.$eval(`tr[data-approval="${opt('--approval')}"]`, (tr) => tr.cells[2].textContent);
  say('request', { text: request });
  await page.click(approve);
  await page.waitForSelector(`tr[data-approval="${opt('--approval')}"]`, { hidden: true, timeout: 15000 });
  say('approved');
  // Kill an API sandbox from its row (issue 41): the row goes with it.
  await page.click(`button[data-kill="${opt('--sandbox')}"]`);
  await page.waitForSelector(`#sandboxes tr[data-id="${opt('--sandbox')}"]`, { hidden: true, timeout: 15000 });
  say('killed');
  const audit = await page.$eval('#audit', (d) => d.textContent);
  say('audit', { text: audit });
  await page.screenshot({ path: opt('--screenshot'), fullPage: true });
  say('screenshot', { path: opt('--screenshot') });
  say('done', { errors, external });
} catch (e) {
  say('error', { message: String(e && e.stack || e) });
  process.exitCode = 1;
} finally {
  await browser.close();
}
