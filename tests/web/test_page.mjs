// The web admin page (docs/web.md) in a real browser: Debian's chromium driven by
// playwright-core, against `vigil serve` on a temporary store with the scripted model.
// Flows: the shell loads without a token while the API refuses without one; the token is
// entered once and kept in sessionStorage (never in the URL or a cookie); the agent list; an
// agent's detail; a wake with a message whose run appears live (event stream); a pending
// approval approved from the queue; a pending memory change approved; the kill switch flipped
// from the page and, from the command line, seen live on the page; a hostile agent name shown
// as text; the report's markdown rendered (headings, lists, emphasis) with a tag in it kept as
// text; an unknown agent's link says so with the way back; the lifecycle controls enabled only as
// the lifecycle allows; typing in a field while a live event refreshes the view (the field keeps
// its text and focus); a running run cancelled and an ended one re-run from the agent view; the
// tasks view (grouped by status, with the tasks each waits for); an agent's lineage (its
// children, its spawn decisions with their reasons, and the agent that spawned it); an opened
// agent's name and a refused action's notice in sight, not under the sticky bar (trial F14); a
// failed run's error beside its badge, in the agent view and the list, and today's budget against
// the limits (F15); chat turns offered no Cancel or Re-run, said to be chat turns (F20).
// Screenshots go to $VIGIL_WEB_ARTIFACTS; VIGIL_WEB_TRACE=1 prints when each check passed.
// Usage: node test_page.mjs PATH/TO/vigil   (ctest: web_page). Exit 77: skipped.
import { execFileSync, spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, rmSync, unlinkSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const VIGIL = process.argv[2];
const SRC = process.env.VIGIL_SOURCE_DIR || path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const CHROMIUM = process.env.VIGIL_CHROMIUM || '/usr/bin/chromium';
const ARTIFACTS = process.env.VIGIL_WEB_ARTIFACTS || path.join(process.env.VIGIL_TEST_TMP || '/tmp', 'web-artifacts');
const WAIT = 60000; // safety timeout of every wait on the page; each wait ends on a real change

// The report the agent sets (after approval): markdown with a hostile tag in it.
const REPORT = '# Ready\nApproved from the **page**.\n\n- one\n- two <script>window.__xss=2</script>';

function skipOrFail(why) {
  if (process.env.VIGIL_REQUIRE_BROWSER) {
    console.error('FAIL: ' + why + ' (VIGIL_REQUIRE_BROWSER is set)');
    process.exit(1);
  }
  console.log('SKIP: ' + why + ' (set VIGIL_REQUIRE_BROWSER=1 to make this a failure)');
  process.exit(77);
}

if (!VIGIL) { console.error('usage: node test_page.mjs PATH/TO/vigil'); process.exit(2); }
if (!existsSync(CHROMIUM)) skipOrFail(CHROMIUM + ' is absent: install Debian\'s chromium (scripts/deps.sh test)');
const pwDir = process.env.VIGIL_PLAYWRIGHT_DIR || path.join(SRC, '.deps/web');
const pwPkg = path.join(pwDir, 'node_modules/playwright-core');
if (!existsSync(pwPkg)) skipOrFail('playwright-core is absent from ' + pwDir + ': run scripts/web-test-deps.sh');
const { chromium } = createRequire(import.meta.url)(pwPkg);

let passed = 0, failed = 0;
const t0 = Date.now();
function check(ok, what) {
  if (process.env.VIGIL_WEB_TRACE) console.log((Date.now() - t0) + " ms: " + what);
  if (ok) passed++;
  else { failed++; console.error('FAIL: ' + what); }
}

mkdirSync(process.env.VIGIL_TEST_TMP || '/tmp', { recursive: true });
const T = mkdtempSync(path.join(process.env.VIGIL_TEST_TMP || '/tmp', 'web.'));
mkdirSync(ARTIFACTS, { recursive: true });
const env = { ...process.env, VIGIL_STORE: path.join(T, 'vigil.db'), VIGIL_MODEL_PROVIDER: 'scripted',
  VIGIL_MODEL_CASSETTE: path.join(T, 'cassette.json') };
delete env.VIGIL_CONFIG;
delete env.XDG_DATA_HOME;
writeFileSync(env.VIGIL_MODEL_CASSETTE, JSON.stringify({ vigil_cassette: 1, exchanges: [
  { response: { tool_calls: [{ id: 'o1', name: 'record_observations', arguments: { notes: ['the browser said hello'] } }] } },
  { response: { text: 'Hello from the page.' } },
  // The long runner's wake: its tool holds the run while HOLD exists (run controls).
  { response: { tool_calls: [{ id: 'h1', name: 'hold', arguments: {} }] } },
  { response: { text: 'Run again.' } }] }));
// The long runner's tool: a program that answers once the test removes HOLD.
const HOLD = path.join(T, 'hold');
const LONG = { name: 'Long runner', tools: ['hold'], command_tools: { hold: {
  command: ['/bin/sh', '-c', 'while [ -e "$0" ]; do sleep 0.05; done; echo \'{"result":"released"}\'', HOLD],
  description: 'Wait until released', timeout_ms: 120000, mutating: false, risk: 'low' } } };

// vigil CLI: stdout, or the exit status when `status` is given and matches.
function vigil(args, status, more) {
  try {
    return execFileSync(VIGIL, args, { env: { ...env, ...more }, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim();
  } catch (e) {
    if (status !== undefined && e.status === status) return e.stdout.trim();
    throw new Error('vigil ' + args.join(' ') + ' exited ' + e.status + ': ' + e.stderr);
  }
}

// A raw request (no URL normalization: "/web/../x" goes out as written).
function raw(port, method, p, headers = {}) {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: p, headers }, (res) => {
      let body = '';
      res.on('data', (c) => (body += c));
      res.on('end', () => resolve({ status: res.statusCode, headers: res.headers, body }));
    });
    req.on('error', reject);
    req.end();
  });
}

function startDaemon() {
  return new Promise((resolve, reject) => {
    const d = spawn(VIGIL, ['serve', '--listen', '127.0.0.1:0', '--workers', '1', '--poll-ms', '50',
      '--events-poll-ms', '100'], { env, stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    d.errText = () => err;
    const timer = setTimeout(() => reject(new Error('daemon did not listen: ' + err)), WAIT);
    d.stderr.on('data', (c) => {
      err += c;
      const m = err.match(/HTTP API on http:\/\/127\.0\.0\.1:(\d+)/);
      if (m) { clearTimeout(timer); resolve({ d, port: Number(m[1]) }); }
    });
    d.once('exit', (code) => reject(new Error('daemon exited ' + code + ': ' + err)));
  });
}

async function main() {
  vigil(['init']);
  const token = vigil(['token']);
  const id = vigil(['agent', 'create', '--name', 'Build watcher', '--config',
    JSON.stringify({ tools: ['set_report', 'record_observations', 'memory_write'], require_approval: ['set_report'] })]);
  vigil(['agent', 'resume', id]);
  vigil(['memory', 'seed', id]);
  const hostile = '<img src=x onerror="window.__xss=1">';
  vigil(['agent', 'create', '--name', hostile]);
  // A call that waits for a human: set_report needs approval for this agent.
  vigil(['tool', 'call', id, 'set_report', JSON.stringify({ scope: 'current', markdown: REPORT }),
    '--run-key', 'web-r1'], 10);
  const approvals = JSON.parse(vigil(['approvals', '--agent', id, '--status', 'pending', '--json']));
  check(approvals.length === 1, 'one pending approval to work with');
  // A proposed change of a familiar block: pending until a human approves.
  vigil(['tool', 'call', id, 'memory_write', JSON.stringify({ label: 'familiar', content: 'Prefers short answers.' }),
    '--run-key', 'web-m1'], undefined);
  // A second proposal: approved from the command line while the page is typed in (B14).
  vigil(['tool', 'call', id, 'memory_write', JSON.stringify({ label: 'familiar', content: 'Likes tables.' }),
    '--run-key', 'web-m2'], undefined);
  const memPending = JSON.parse(vigil(['memory', 'pending', '--agent', id, '--json']));
  writeFileSync(path.join(T, 'long.json'), JSON.stringify(LONG));
  vigil(['agent', 'apply', path.join(T, 'long.json')]);
  const longId = JSON.parse(vigil(['agent', 'list', '--json'])).items.find((a) => a.name === 'Long runner').id;
  vigil(['agent', 'resume', longId]);
  // Lineage: a planner that may spawn, and a worker it spawns (late in the flows: the child's
  // run takes the model's next answer). Tasks: "Write the summary" waits for "Gather the logs".
  writeFileSync(path.join(T, 'planner.json'), JSON.stringify({ name: 'Planner', kind: 'lead',
    prompt: 'You split work.', tools: ['spawn_agents'], spawn: { enabled: true } }));
  writeFileSync(path.join(T, 'worker.json'), JSON.stringify({ name: 'Worker one', kind: 'worker', prompt: 'You do a part.' }));
  vigil(['agent', 'apply', path.join(T, 'planner.json')]);
  vigil(['agent', 'apply', path.join(T, 'worker.json')]);
  // Chat turns (F15, F20), from the command line with their own cassettes: one answered, one the
  // provider refused (its run failed with the provider's words).
  vigil(['agent', 'create', '--name', 'Chatty', '--config', JSON.stringify({ tools: ['set_report'], budgets: { tool_calls: 5 } })]);
  vigil(['agent', 'resume', 'Chatty']);
  const chatTurn = (i, exchange) => {
    const cassette = path.join(T, 'chat' + i + '.json');
    writeFileSync(cassette, JSON.stringify({ vigil_cassette: 1, exchanges: [exchange] }));
    try {
      vigil(['chat', 'Chatty', '-m', 'turn ' + i], undefined, { VIGIL_MODEL_CASSETTE: cassette });
    } catch (e) {
      if (i !== 2) throw e; // the refused turn exits non-zero, its run failed
    }
  };
  chatTurn(1, { response: { text: 'Hello from a chat turn.' } });
  chatTurn(2, { error: { code: 'EAUTH', message: 'http 401 (authentication failed): bad key' } });
  const summary = JSON.parse(vigil(['task', 'add', '--title', 'Write the summary', '--json'])).id;
  vigil(['task', 'add', '--title', 'Gather the logs', '--kind', 'worker', '--blocks', summary, '--json']);
  // A task in attention: its run completed with a call in doubt. The real way there is a daemon
  // killed mid-call (tests/cli/test_task_doubt.sh); here the stored task is set so directly, as
  // that run's end writes it, for the views that show it.
  const doubted = JSON.parse(vigil(['task', 'add', '--title', 'Restart the cluster', '--json'])).id;
  execFileSync('sqlite3', [env.VIGIL_STORE, "UPDATE records SET k1 = 'attention', body = json_set(body, '$.status', " +
    "'attention', '$.result', 'restarted', '$.in_doubt', json('{\"run_key\":\"0123456789abcdef0123\",\"calls\":1,\"since_ms\":1}')) " +
    "WHERE kind = 'task' AND body LIKE '%Restart the cluster%'"]);
  check(JSON.parse(vigil(['task', 'show', doubted, '--json'])).status === 'attention', 'a task in attention to show');

  const { d, port } = await startDaemon();
  const base = 'http://127.0.0.1:' + port;
  let browser;
  try {
    await flows(port, base, token, { id, longId }, hostile, memPending, (b) => (browser = b));
  } catch (e) {
    await failureShot();
    throw e;
  } finally {
    if (browser) await browser.close();
    // The daemon stops cleanly, and a sanitizer build reported nothing while it served the page.
    const exited = new Promise((resolve) => d.on('exit', (code, sig) => resolve(code === null ? sig : code)));
    d.kill('SIGTERM');
    const code = await exited;
    check(code === 0, 'the daemon exited ' + code + ' after SIGTERM');
    check(!/ERROR: AddressSanitizer|runtime error:|LeakSanitizer/.test(d.errText()), 'sanitizer report: ' + d.errText().slice(-2000));
  }
}

let failureShot = async () => {};

async function flows(port, base, token, { id, longId }, hostile, memPending, keep) {
  let browser;
  {
    // The shell without a token; the data never without one; no path outside the table.
    const shell = await raw(port, 'GET', '/', { Host: '127.0.0.1:' + port });
    check(shell.status === 200 && shell.body.includes('/web/app.js'), 'GET / serves the page without a token');
    check(/script-src 'self'/.test(shell.headers['content-security-policy'] || ''), 'the page carries its CSP');
    check((await raw(port, 'GET', '/web/app.js')).status === 200, 'the script is served without a token');
    check((await raw(port, 'GET', '/v1/agents')).status === 401, 'the API still needs the token');
    check((await raw(port, 'GET', '/web/../v1/agents')).status === 400, 'a dot segment is refused');
    check((await raw(port, 'GET', '/web/%2e%2e/v1/agents')).status === 400, 'an escaped dot segment is refused');
    check((await raw(port, 'GET', '/web/nothing.js')).status === 401, 'a file not embedded is not served');
    check((await raw(port, 'POST', '/')).status !== 200, 'only GET and HEAD serve the page');

    // A fresh profile (playwright passes it as --user-data-dir) on a laptop-sized screen.
    browser = await chromium.launchPersistentContext(path.join(T, 'chromium-profile'), {
      executablePath: CHROMIUM, headless: true, viewport: { width: 1366, height: 800 },
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
        '--disable-background-networking', '--disable-component-update', '--disable-sync'] });
    keep(browser);
    const context = browser;
    const page = context.pages()[0] || await context.newPage();
    page.setDefaultTimeout(WAIT);
    const pageErrors = [];
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    page.on('console', (m) => m.type() === 'error' && pageErrors.push('console: ' + m.text()));
    failureShot = async () => {
      await page.screenshot({ path: path.join(ARTIFACTS, 'failure.png'), fullPage: true }).catch(() => {});
      console.error('page errors: ' + pageErrors.join('; ') + '\nnotice: ' +
        await page.locator('#notice').innerText().catch(() => ''));
    };
    const dialogs = [];
    page.on('dialog', (dlg) => { dialogs.push(dlg.message()); dlg.accept(); });
    const shot = (name) => page.screenshot({ path: path.join(ARTIFACTS, name + '.png'), fullPage: true });
    const shotView = (name) => page.screenshot({ path: path.join(ARTIFACTS, name + '.png') }); // what one sees
    // Where an element is against the viewport and the sticky bar (trial F14).
    const inSight = (sel) => page.evaluate((q) => {
      const r = document.querySelector(q).getBoundingClientRect();
      const bar = (document.getElementById('bar') || document.querySelector('header')).getBoundingClientRect();
      return { top: r.top, bottom: r.bottom, bar: bar.bottom, height: innerHeight, y: scrollY };
    }, sel);

    // Token: asked once, kept in sessionStorage, entered with the keyboard.
    await page.goto(base + '/');
    await page.waitForSelector('#token-input');
    await shot('01-token');
    await page.focus('#token-input');
    await page.keyboard.type(token);
    await page.keyboard.press('Enter');
    await page.waitForSelector('#agents');
    check(await page.evaluate(() => sessionStorage.getItem('vigil.token')) === token, 'the token is in sessionStorage');
    check(!page.url().includes(token), 'the token is not in the URL');
    check((await context.cookies()).length === 0, 'no cookie is set');

    // The agent list: lifecycle, pending items; a hostile name is text.
    const row = page.locator('#agents tr', { hasText: 'Build watcher' });
    await row.waitFor();
    check(/active/.test(await row.innerText()), 'the list shows the lifecycle');
    await page.locator('#agents tr', { hasText: 'pending' }).first().waitFor();
    check(await page.locator('#agents', { hasText: hostile }).count() === 1, 'a hostile name shows as text');
    check(await page.evaluate(() => window.__xss === undefined), 'a hostile name runs nothing');
    await page.waitForSelector('#live.on');
    await shot('02-agents');

    // Detail, then a wake with a message: the run appears live, from the event stream.
    // proves: S3-065 (the detail page: header, report, activity, tool calls, state, runs, controls)
    // proves: S3-066 (the page updates live from the event stream) S2-044 (runs, run detail, messages)
    await row.locator('a').focus();
    await page.keyboard.press('Enter');
    await page.waitForSelector('#controls');
    await page.waitForSelector('#agent-approvals');
    const head = await inSight('#agent-head h1');
    check(head.top >= head.bar - 1, 'the opened agent\'s name is below the sticky bar, not under it: ' + JSON.stringify(head));
    await shotView('02b-agent-opened-viewport');
    const runsBefore = await page.locator('#runs details').count();
    await page.fill('#wake-message', 'hello from the browser');
    await page.press('#wake-message', 'Enter');
    await page.locator('#runs details', { hasText: 'completed' }).first().waitFor();
    check(await page.locator('#runs details').count() === runsBefore + 1, 'the woken run appears on the page');
    await page.locator('#runs details summary').first().click();
    await page.locator('#runs details[open]', { hasText: 'hello from the browser' }).waitFor();
    await page.locator('#runs details[open]', { hasText: 'record_observations' }).waitFor();
    check(true, 'the run shows its messages and tool calls');
    await page.locator('#tool-calls', { hasText: 'the browser said hello' }).waitFor();
    check(true, 'the tool-call history shows the input');
    await shot('03-detail-after-wake');

    // B14: a live refresh while a reason is typed keeps the field, its text and its focus.
    if (memPending.length >= 2) {
      const reason = page.locator('#agent-approvals input[aria-label="Reason"]');
      await reason.click();
      await page.keyboard.type('looks ');
      const before = await page.locator('#memory-pending li').count();
      vigil(['memory', 'approve', memPending[memPending.length - 1].id]); // an event: the view refreshes
      await page.waitForFunction((n) => document.querySelectorAll('#memory-pending li').length === n - 1, before);
      await page.keyboard.type('fine');
      check(await reason.inputValue() === 'looks fine', 'a field typed in while the view refreshed keeps its text: "' +
        await reason.inputValue() + '"');
      check(await reason.evaluate((n) => n === document.activeElement), 'the field keeps its focus across the refresh');
      await reason.fill('');
    } else {
      console.log('note: the second memory_write made no pending change; the typing flow was not driven');
    }

    // Pending memory change, approved from the detail page.
    if (memPending.length) {
      await page.locator('#memory-pending button', { hasText: 'Approve change' }).first().click();
      await page.waitForFunction(() => !document.querySelector('#memory-pending'));
      const left = JSON.parse(vigil(['memory', 'pending', '--agent', id, '--json']));
      check(left.length === 0, 'the memory change was approved from the page');
    } else {
      console.log('note: memory_write made no pending change; that flow was not driven');
    }

    // The approvals queue: approve the pending tool call.
    await page.click('#nav-approvals');
    await page.locator('#approvals tr', { hasText: 'set_report' }).waitFor();
    await shot('04-approvals');
    check(await page.locator('#approvals-resolved-empty').innerText() === 'No approval resolved yet.',
      'an empty "Recently resolved" says so in its own words (B12)');
    await page.locator('#approvals tr', { hasText: 'set_report' }).getByRole('button', { name: 'Approve' }).click();
    await page.locator('#approvals-resolved tr', { hasText: 'approved' }).waitFor();
    // The page says what the answer did (trial F13); a call made by hand wakes no agent.
    check(await page.locator('#status', { hasText: 'Approval approved' }).waitFor({ timeout: 5000 })
      .then(() => true, () => false), 'the page says the approval was answered');
    const after = JSON.parse(vigil(['approvals', '--agent', id, '--json']));
    check(after.length === 1 && after[0].status === 'approved', 'the approval was resolved from the page');

    // The approved call, made again, runs once: the report's headline shows in the list.
    vigil(['tool', 'call', id, 'set_report', JSON.stringify({ scope: 'current', markdown: REPORT }),
      '--run-key', 'web-r1']);
    await page.click('#nav-agents');
    await page.locator('#agents tr', { hasText: 'Build watcher' }).filter({ hasText: 'Ready' }).waitFor();
    check(true, 'the list shows the report headline');
    // proves: S3-054 (the page renders the report's markdown)
    await page.locator('#agents a', { hasText: 'Build watcher' }).click();
    await page.locator('#report h3', { hasText: 'Ready' }).waitFor();
    check(await page.locator('#report strong').innerText() === 'page', 'the report renders emphasis');
    check(await page.locator('#report li').count() === 2, 'the report renders a list');
    check(await page.locator('#report script').count() === 0 && await page.evaluate(() => window.__xss === undefined),
      'a tag in the report is text, not markup');
    check(/Lifecycle\s*active/.test(await page.locator('#activity').innerText()), 'the activity panel lists the state');
    check(/written /.test(await page.locator('#report-meta').innerText()), 'the report says when it was written');
    check(await page.locator('#report-meta .badge.stale').count() === 0, 'a current report is not stale by age');
    const hand = page.locator('#hand-calls li', { hasText: 'set_report' }).first();
    check(/web-r1/.test(await hand.innerText()), 'a tool call made by hand is listed with its run key');
    await shot('04b-report');

    // The kill switch: on from the page (seen in the store), off from the command line (seen live).
    await page.click('#kill-toggle');
    await page.waitForSelector('#kill.on');
    check(/"on": true|"global"/.test(vigil(['kill', 'status', '--json'])), 'the page turned the kill switch on');
    await page.goto(base + '/#/agents/' + id); // every page shows it, also after a reload
    await page.reload();
    await page.waitForSelector('#agent-head');
    await page.waitForSelector('#kill.on');
    check(await page.locator('#token-input').count() === 0, 'a reload keeps the token (sessionStorage)');
    await shot('05-kill-on');
    // A refused wake, pressed with the page scrolled down: its notice is in sight (trial F14).
    const errorsAtWake = pageErrors.length;
    await page.fill('#wake-message', 'refused while the kill switch is on');
    await page.focus('#wake-message');
    await page.evaluate(() => window.scrollTo(0, document.body.scrollHeight));
    await page.keyboard.press('Enter');
    await page.locator('#notice', { hasText: 'kill switch' }).waitFor();
    const refused = await inSight('#notice');
    check(refused.y > 0 && refused.top >= 0 && refused.bottom <= refused.height,
      'a refused wake\'s notice is in sight while the page is scrolled: ' + JSON.stringify(refused));
    await shotView('05a-refused-wake-viewport');
    // The browser logs the 423 it was given (a kill switch refuses a wake as it refuses a chat
    // turn) as a console error: expected here, and only here.
    pageErrors.push(...pageErrors.splice(errorsAtWake).filter((e) => !/status of 423/.test(e)));
    await page.fill('#wake-message', '');
    vigil(['kill', 'off']);
    await page.waitForSelector('#kill:not(.on)');
    check(true, 'the kill switch turned off elsewhere shows live');

    // Pause and resume from the controls, each enabled only when the lifecycle allows it (B13).
    const quick = { timeout: 10000 };
    await page.waitForSelector('#resume:disabled', quick);
    check(await page.locator('#pause').isEnabled(), 'an active agent can be paused, not resumed');
    await page.click('#pause');
    await page.locator('#agent-head h1', { hasText: 'dormant' }).waitFor();
    await page.waitForSelector('#pause:disabled', quick);
    await page.waitForSelector('#resume:enabled', quick);
    check(true, 'a dormant agent can be resumed, not paused');
    await page.click('#resume');
    await page.locator('#agent-head h1', { hasText: 'active' }).waitFor();
    await page.waitForSelector('#resume:disabled', quick);
    check(true, 'pause and resume from the page');

    // B11: a link to no agent says so in the view, with the way back.
    const errorsBefore = pageErrors.length;
    await page.goto(base + '/#/agents/nosuch');
    await page.locator('#not-found', { hasText: 'nosuch' }).waitFor(quick);
    // The browser logs the 404 it was given as a console error: expected here, and only here.
    pageErrors.push(...pageErrors.splice(errorsBefore).filter((e) => !/status of 404/.test(e)));
    check(/no agent/.test(await page.locator('#not-found').innerText()), 'an unknown agent is named in the view');
    await shot('05b-no-agent');
    await page.locator('#view a', { hasText: 'Back to the agents' }).click();
    await page.waitForSelector('#agents');
    check(true, 'the view links back to the agents');

    // Run controls (finding 27): a running run cancelled, an ended one re-run with a prompt.
    // proves: S0-132 (with pause and resume above: the human controls, all from the page)
    await page.goto(base + '/#/agents/' + longId);
    await page.waitForSelector('#controls');
    writeFileSync(HOLD, '');
    vigil(['wake', longId]);
    const running = page.locator('#runs .run', { hasText: 'running' }).first();
    await running.waitFor();
    // The agent is busy: a second wake waits in the queue, listed from the wake log.
    const queuedKey = vigil(['wake', longId, '-m', 'queued behind']);
    await running.locator('button', { hasText: 'Cancel run' }).click();
    await page.locator('#status', { hasText: 'cancel requested' }).waitFor();
    check(dialogs.some((m) => /Cancel this run/.test(m)), 'the page asks before cancelling a run');
    await shot('06-run-cancel-requested');
    const queued = page.locator('#runs .run[data-queued="' + queuedKey + '"]');
    check(/queued behind/.test(await queued.innerText()), 'a queued wake is listed with its message');
    await queued.locator('button', { hasText: 'Cancel run' }).click();
    await page.locator('#status', { hasText: 'it will not start' }).waitFor();
    await queued.waitFor({ state: 'detached' });
    check(JSON.parse(vigil(['wakes', '--agent', longId, '--json'])).find((w) => w.run_key === queuedKey).status === 'cancelled',
      'a queued run was cancelled from the page before it started');
    unlinkSync(HOLD);
    const ended = page.locator('#runs .run', { hasText: 'canceled' }).first();
    await ended.waitFor();
    check(JSON.parse(vigil(['runs', 'list', '--agent', longId, '--json'])).items[0].status === 'canceled',
      'the run was cancelled from the page');
    check(await ended.locator('button', { hasText: 'Cancel run' }).count() === 0, 'an ended run offers no Cancel');
    await ended.locator('input').fill('once more, from the page');
    await ended.locator('button', { hasText: 'Re-run' }).click();
    await page.locator('#status', { hasText: 'Re-run queued' }).waitFor();
    check(dialogs.some((m) => /Run this again/.test(m)), 'the page asks before re-running');
    await page.waitForFunction(() => document.querySelectorAll('#runs .run').length === 2 &&
      /completed/.test(document.querySelector('#runs .run').textContent));
    await page.locator('#runs .run').first().locator('summary').click();
    await page.locator('#runs details[open]', { hasText: 'once more, from the page' }).waitFor();
    check(true, 'the re-run ran with the prompt given on the page, listed live');
    await page.locator('#runs details[open] button', { hasText: 'Replay from the journal' }).click();
    await page.locator('#runs details[open] pre', { hasText: '"stored_projection_matches": true' }).waitFor();
    check(true, 'the re-run replayed from its journal on the page');
    await shot('07-run-rerun');

    // The task graph: grouped by status, each task with the titles of the tasks it waits for.
    await page.click('#nav-tasks');
    const waiting = page.locator('section[data-status="pending"] tr', { hasText: 'Write the summary' });
    await waiting.waitFor();
    check(/Gather the logs/.test(await waiting.locator('td').nth(4).innerText()), 'a task names the task it waits for');
    check(/not dispatched/.test(await waiting.innerText()), 'a task not dispatched says so');
    check(await page.locator('section[data-status="ready"] tr', { hasText: 'Gather the logs' }).count() === 1,
      'a task with nothing to wait for is ready');
    check(await page.locator('#nav-tasks[aria-current="page"]').count() === 1, 'the nav marks the tasks view');
    // A task in attention is shown first, saying which calls of which run wait for a person.
    const held = page.locator('section[data-status="attention"] tr', { hasText: 'Restart the cluster' });
    await held.waitFor();
    check(/In doubt: 1 call\(s\) of run 0123456789abcdef/.test(await held.innerText()), 'a task in attention names its calls in doubt');
    check(await page.locator('section[data-status]').first().getAttribute('data-status') === 'attention',
      'tasks in attention come first');
    const metrics = await raw(port, 'GET', '/metrics', { Authorization: 'Bearer ' + token });
    check(/vigil_tasks\{status="attention"\} 1/.test(metrics.body), '/metrics counts the task in attention: ' + metrics.status);
    const status = JSON.parse(vigil(['status', '--json'], 11));
    check(status.tasks_attention === 1 && status.attention.some((l) => /task\(s\) in attention/.test(l)),
      'vigil status says a task is in attention');
    await shot('08-tasks');

    // Lineage, as `vigil agent tree`: the planner's child and its decisions (a denied one with
    // its reason), then the child's view naming the planner that spawned it.
    const planner = JSON.parse(vigil(['agent', 'list', '--json'])).items.find((a) => a.name === 'Planner').id;
    vigil(['tool', 'call', planner, 'spawn_agents', JSON.stringify({ requests: [
      { agent: 'Worker one', goal: 'read the logs' }, { kind: 'nobody', goal: 'find no one' }] }), '--run-key', 'web-spawn-1']);
    await page.goto(base + '/#/agents/' + planner);
    await page.locator('#children a', { hasText: 'Worker one' }).waitFor();
    check(/read the logs/.test(await page.locator('#children').innerText()), 'a child is listed with its goal');
    const decisions = await page.locator('#decisions').innerText();
    check(/denied/.test(decisions) && /no live agent of the requested kind/.test(decisions),
      'a denied spawn is listed with its reason');
    check(/admitted/.test(decisions), 'an admitted spawn is listed');
    await shot('09-lineage');
    await page.locator('#children a', { hasText: 'Worker one' }).click();
    await page.locator('#spawned-by a', { hasText: 'Planner' }).waitFor();
    check(/read the logs/.test(await page.locator('#spawned-by').innerText()), 'a child names who spawned it, and why');
    await shot('10-spawned-by');

    // Chat turns (F15, F20): the failed one's error beside its badge, no Cancel or Re-run for
    // either, today's budget against the agent's limit; the list shows the last run's error.
    await page.click('#nav-agents');
    const chatty = page.locator('#agents tr', { hasText: 'Chatty' });
    await chatty.locator('[data-run-error]', { hasText: 'authentication failed' }).waitFor();
    check(true, 'the agents list shows why the last run failed');
    await chatty.locator('a').click();
    await page.locator('#runs .run', { hasText: 'failed' }).locator('[data-run-error]', { hasText: 'http 401 (authentication failed)' }).waitFor();
    check(true, 'a failed run shows its error beside its badge');
    check(await page.locator('#runs .run').count() === 2, 'both chat turns are listed');
    check(await page.locator('#runs [data-chat-turn]').count() === 2 &&
      await page.locator('#runs button', { hasText: /Re-run|Cancel run/ }).count() === 0,
      'chat turns are said to be chat turns, with no Re-run or Cancel to be refused');
    check(/Budget today\s*(\S.*, )?tool calls 0 \/ 5/.test(await page.locator('#activity').innerText()),
      'the agent view shows today\'s budget against its limit: ' + await page.locator('#activity').innerText());
    await shot('11-chat-turns');

    // Destroy, from the controls of the other agent (the page asks first; the test accepts).
    await page.click('#nav-agents');
    await page.locator('#agents a', { hasText: hostile }).click();
    await page.locator('#agent-head h1', { hasText: 'created' }).waitFor();
    await page.click('#destroy');
    await page.locator('#agent-head h1', { hasText: 'destroyed' }).waitFor();
    check(true, 'destroy from the page');
    // proves: S3-009 (paused above and destroyed here, from the detail page)

    // Signing out forgets the token.
    await page.click('#signout');
    await page.waitForSelector('#token-input');
    check(await page.evaluate(() => sessionStorage.getItem('vigil.token')) === null, 'the token is forgotten');
    check(pageErrors.length === 0, 'no script error on the page: ' + pageErrors.join('; '));
  }
}

try {
  await main();
} catch (e) {
  failed++;
  console.error('FAIL: ' + (e.stack || e));
}
console.log(passed + ' passed, ' + failed + ' failed; screenshots in ' + ARTIFACTS);
if (!failed) rmSync(T, { recursive: true, force: true });
process.exit(failed ? 1 : 0);
