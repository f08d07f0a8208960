// Opens a lagom trace (Chrome trace event JSON) in a real viewer, speedscope, in headless
// Chromium, and fails on anything the viewer says while importing it: an import warning or
// error, a nesting warning ("Tried to end ... when ... was on the top of the stack": slices
// that overlap on a track), a page error, or a profile that does not show the workers.
//
// usage: node .ci/trace_viewer.mjs MODULES TRACE.json [SCREENSHOT.png]
//   MODULES: a node_modules folder holding speedscope and playwright-core (.ci/run installs
//   them from the npm registry); Chromium is Debian's, /usr/bin/chromium.
//
// speedscope is served from a server on 127.0.0.1 (it fetches the trace by URL); every other
// request is refused, so nothing leaves the machine.
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { createRequire } from 'node:module';

const [modules, trace, shot] = process.argv.slice(2);
if (!modules || !trace) {
  console.error('usage: node .ci/trace_viewer.mjs MODULES TRACE.json [SCREENSHOT.png]');
  process.exit(2);
}
const require = createRequire(path.resolve(modules) + '/');
const { chromium } = require('playwright-core');
const viewer = path.join(path.dirname(require.resolve('speedscope/package.json')), 'dist/release');

const types = {
  '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css', '.json': 'application/json',
  '.wasm': 'application/wasm', '.png': 'image/png', '.ico': 'image/x-icon',
  '.woff2': 'font/woff2', '.txt': 'text/plain',
};
const server = http.createServer((req, res) => {
  const url = new URL(req.url, 'http://127.0.0.1');
  const file = url.pathname === '/trace.json'
    ? path.resolve(trace)
    : path.join(viewer, path.normalize(decodeURIComponent(url.pathname)).replace(/^(\.\.[/\\])+/, ''));
  fs.readFile(file, (err, data) => {
    if (err) { res.writeHead(404); res.end(); return; }
    res.writeHead(200, { 'content-type': types[path.extname(file)] || 'application/octet-stream' });
    res.end(data);
  });
});
await new Promise((ok) => server.listen(0, '127.0.0.1', ok));
const base = `http://127.0.0.1:${server.address().port}`;

const problems = [];
const browser = await chromium.launch({
  executablePath: '/usr/bin/chromium',
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking',
    // WebGL without a GPU: speedscope draws its flame chart with it.
    '--use-angle=swiftshader', '--enable-unsafe-swiftshader'],
});
try {
  const page = await browser.newPage({ viewport: { width: 1600, height: 900 } });
  await page.route('**/*', (route) =>
    route.request().url().startsWith(base) ? route.continue() : route.abort());
  page.on('console', (m) => {
    if (m.type() !== 'warning' && m.type() !== 'error') return;
    // Chromium's own GL debug output from the software renderer (performance notes such as
    // "GPU stall due to ReadPixels"), not the page's: everything else counts.
    if (/^\[\.WebGL-[0-9a-fx]+\]GL Driver Message \([^)]*, Performance,/.test(m.text())) return;
    problems.push(`console.${m.type()}: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  const profileURL = encodeURIComponent(`${base}/trace.json`);
  await page.goto(`${base}/index.html#profileURL=${profileURL}`);
  // Imported: the toolbar names the profile (the trace's first track, a worker), with its
  // index among the tracks ("1/3").
  await page.waitForFunction(() => /worker 0 \(cpu \d+\)/.test(document.body.innerText),
    null, { timeout: 30000 });
  const text = await page.evaluate(() => document.body.innerText);
  const tracks = text.match(/(\d+)\s*\/\s*(\d+)/);
  // Let the flame chart draw (and any late warning come) before looking.
  await page.waitForTimeout(500);
  if (shot) await page.screenshot({ path: shot });
  if (problems.length > 0) {
    console.error(`speedscope reported ${problems.length} problem(s) importing ${trace}:`);
    for (const p of problems.slice(0, 20)) console.error(`  ${p}`);
    process.exitCode = 1;
  } else {
    console.log(`speedscope imported ${trace} without a warning: ${tracks ? tracks[2] + ' tracks' : 'tracks shown'}`);
  }
} finally {
  await browser.close();
  server.close();
}
