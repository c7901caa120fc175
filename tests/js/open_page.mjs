// Opens a URL in Debian's chromium (headless, through puppeteer-core), waits
// for a selector, and prints the page's title and that element's text as one
// JSON line; saves a screenshot when asked. For `make demo-session` (issue
// 41): a page a sandbox serves, opened through a port URL of serve.
//
//   node open_page.mjs --url URL --selector CSS [--screenshot PATH]
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const require = createRequire(path.join(here, 'npm', 'node_modules', 'x.js'));
const puppeteer = (await import(require.resolve('puppeteer-core'))).default;
const args = process.argv.slice(2);
const opt = (name) => { const i = args.indexOf(name); return i >= 0 ? args[i + 1] : undefined; };

const browser = await puppeteer.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--no-sandbox', '--disable-gpu', '--no-first-run'],
});
try {
  const page = await browser.newPage();
  await page.setViewport({ width: 900, height: 500 });
  const response = await page.goto(opt('--url'), { waitUntil: 'domcontentloaded' });
  await page.waitForSelector(opt('--selector'), { timeout: 15000 });
  const text = await page.$eval(opt('--selector'), (e) => e.textContent);
  if (opt('--screenshot')) await page.screenshot({ path: opt('--screenshot') });
  console.log(JSON.stringify({ status: response.status(), title: await page.title(), text }));
} finally {
  await browser.close();
}
