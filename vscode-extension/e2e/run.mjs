// End to end: a real code-server with the redline VSIX, driven by headless Debian chromium.
// Opens the demo workspace with real py-spy profiles, sees the code lens and the heat, the flame
// graph (a click opens the source; the cursor's function is highlighted), runs Optimise, sees the
// diff review, accepts, saves, checks the file on disk changed and the lens marks the function
// changed, then profiles again and reads the program's change. Then a program that prints, with no
// inputs for its hot function: Capture and optimise from local candidate files, review, Accept; and a
// run cancelled from its progress notification while a candidate spins.
// Env: REDLINE_PYTHON (interpreter with redline installed), REDLINE_SCREENSHOTS (folder to keep screenshots).
import { execFileSync, spawn } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
const ext = join(here, "..");
const repo = join(ext, "..");
const python = process.env.REDLINE_PYTHON || join(repo, ".venv", "bin", "python");
const shots = process.env.REDLINE_SCREENSHOTS || join(repo, "docs", "screenshots");
const vsix = join(ext, "redline.vsix");
const codeServer = join(here, "node_modules", ".bin", "code-server");

function log(msg) {
  console.log(`[e2e ${new Date().toISOString().slice(11, 19)}] ${msg}`);
}

function freePort() {
  return new Promise((resolve) => {
    const s = createServer();
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

async function main() {
  if (!existsSync(vsix)) throw new Error(`${vsix} is missing: npm run package first`);
  const work = mkdtempSync(join(tmpdir(), "redline-e2e-"));
  const ws = join(work, "project");
  mkdirSync(join(ws, ".vscode"), { recursive: true });
  copyFileSync(join(repo, "examples", "demo", "app.py"), join(ws, "app.py"));
  writeFileSync(join(ws, "redline.toml"), "");
  copyFileSync(join(repo, "tests", "workloads", "orders_work.py"), join(ws, "orders.py"));
  for (const [folder, name] of [["candidates", "parse_split.py"], ["candidates-spin", "parse_spins.py"]]) {
    mkdirSync(join(ws, folder));
    copyFileSync(join(here, folder, name), join(ws, folder, name));
  }
  log("recording py-spy profiles of the printing workload and of the demo");
  execFileSync(python, ["-m", "redline.cli", "profile", "-o", join(ws, ".redline", "orders.speedscope.json"), "--rate",
                        "200", "--", python, "orders.py", "400"], { stdio: "inherit", cwd: ws });
  execFileSync(python, ["-m", "redline.cli", "profile", "-o", join(ws, ".redline", "app.speedscope.json"), "--rate", "200",
                        "--", python, join(ws, "app.py")], { stdio: "inherit", cwd: ws });
  const settings = {
    "redline.interpreter": python, "redline.budget": 2, "redline.rounds": 1,
    "workbench.startupEditor": "none", "security.workspace.trust.enabled": false, "telemetry.telemetryLevel": "off",
    "editor.codeLens": true, "workbench.tips.enabled": false,
  };
  writeFileSync(join(ws, ".vscode", "settings.json"), JSON.stringify(settings, null, 2));
  const userData = join(work, "user"), extDir = join(work, "extensions");
  log("installing the VSIX into code-server");
  execFileSync(codeServer, ["--user-data-dir", userData, "--extensions-dir", extDir, "--install-extension", vsix],
               { stdio: "inherit" });
  const port = await freePort();
  const server = spawn(codeServer, ["--auth", "none", "--bind-addr", `127.0.0.1:${port}`, "--disable-telemetry",
                                    "--disable-update-check", "--disable-workspace-trust", "--user-data-dir", userData,
                                    "--extensions-dir", extDir, ws], { stdio: ["ignore", "pipe", "pipe"] });
  let serverLog = "";
  server.stdout.on("data", (d) => (serverLog += d));
  server.stderr.on("data", (d) => (serverLog += d));
  const browser = await chromium.launch({
    executablePath: "/usr/bin/chromium", headless: true,
    args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
           "--disable-component-update", "--disable-sync"],
  });
  try {
    const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
    for (let i = 0; i < 60; i++) {
      try {
        await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(ws)}`, { timeout: 5000 });
        break;
      } catch {
        await page.waitForTimeout(500);
      }
    }
    await page.waitForSelector(".monaco-workbench", { timeout: 60000 });
    log("workbench up; opening app.py");
    const row = page.locator(".explorer-folders-view .monaco-list-row", { hasText: "app.py" }).first();
    await row.waitFor({ timeout: 60000 });
    await row.click();
    await page.waitForSelector(".monaco-editor .view-lines", { timeout: 30000 });
    log("waiting for redline's code lens");
    const lens = page.locator(".codelens-decoration a", { hasText: "Optimise" }).first();
    await lens.waitFor({ timeout: 120000 });
    const lensText = await page.locator(".codelens-decoration").first().innerText();
    if (!/self \d+%/.test(lensText)) throw new Error(`code lens without shares: ${lensText}`);
    const heatLines = await page.evaluate(() => [...document.querySelectorAll(".view-overlays div")]
      .filter((el) => getComputedStyle(el).backgroundColor.includes("255, 64, 0")).length);
    if (heatLines < 1) throw new Error("heat decorations are not on any line");
    mkdirSync(shots, { recursive: true });
    await page.screenshot({ path: join(shots, "lens-and-heat.png") });
    log(`lens "${lensText}", ${heatLines} heat lines; opening the flame graph`);
    const lnItem = page.locator(".statusbar-item", { hasText: /Ln \d+/ }).first();
    const before = await lnItem.innerText();
    await runCommand(page, "redline: Show flame graph");
    const flame = page.frameLocator("iframe.webview").frameLocator("iframe#active-frame");
    await flame.locator("canvas").first().waitFor({ timeout: 60000 });
    await page.waitForTimeout(1500);  // speedscope lays out the chart after loading the profile
    await page.screenshot({ path: join(shots, "flame-graph.png") });
    // speedscope draws on one canvas over the whole view; frames of the flame chart start below
    // its overview strip and time ruler, about 150 px down.
    const canvases = flame.locator("canvas");
    let box = null;
    for (let i = 0; i < await canvases.count(); i++) {
      const b = await canvases.nth(i).boundingBox();
      if (b && (!box || b.width * b.height > box.width * box.height)) box = b;
    }
    let revealed = null;
    for (const y of [152, 172, 192, 212]) {
      await page.mouse.move(box.x + box.width * 0.6, box.y + y);
      await page.waitForTimeout(300);
      await page.mouse.click(box.x + box.width * 0.6, box.y + y);
      try {
        await page.locator(".statusbar-item", { hasText: /Ln \d+/ }).first().waitFor({ timeout: 2000 });
        const now = await lnItem.innerText();
        if (now !== before) { revealed = now; break; }
      } catch { /* the click landed on no frame with a file */ }
    }
    if (!revealed) throw new Error("clicking a frame in the flame graph revealed no source line");
    log(`flame graph click revealed the source: ${revealed}`);
    // Back to the hot function (the reveal scrolled the editor to the clicked frame's line).
    await page.keyboard.press("Control+G");
    await page.waitForSelector(".quick-input-widget input", { timeout: 30000 });
    await page.keyboard.type("16");
    await page.keyboard.press("Enter");
    // The other way: the function at the cursor is searched for, so highlighted, in the flame graph.
    const search = flame.locator("input").first();
    await search.waitFor({ timeout: 15000 });
    for (let i = 0; i < 40 && (await search.inputValue()) !== "rolling_zscore"; i++) await page.waitForTimeout(250);
    if ((await search.inputValue()) !== "rolling_zscore") {
      throw new Error(`the flame graph does not follow the cursor: its search holds "${await search.inputValue()}"`);
    }
    await page.screenshot({ path: join(shots, "flame-graph-follows-cursor.png") });
    log("the cursor's function is highlighted in the flame graph: OK");
    log("running Optimise hotspot at the cursor");
    await runCommand(page, "redline: Optimise hotspot");
    const diffTab = page.locator(".tab", { hasText: "faster" }).first();
    await diffTab.waitFor({ timeout: 240000 });
    await page.waitForSelector(".monaco-diff-editor", { timeout: 30000 });
    await page.waitForTimeout(1000);
    await page.screenshot({ path: join(shots, "diff-review.png") });
    const title = await diffTab.innerText();
    log(`diff review open: ${title.replace(/\s+/g, " ")}`);
    const accept = page.locator(".notifications-toasts .monaco-button", { hasText: "Accept" }).first();
    await accept.waitFor({ timeout: 30000 });
    await accept.click();
    const applied = page.locator(".notifications-toasts .notification-toast", { hasText: "winner applied" }).first();
    await applied.waitFor({ timeout: 60000 });
    await diffTab.waitFor({ state: "detached", timeout: 10000 });
    await applied.locator(".monaco-button", { hasText: "Profile again and compare" }).waitFor({ timeout: 10000 });
    log("diff review closed after Accept, re-profile offered: OK");
    await page.keyboard.press("Control+S");
    for (let i = 0; i < 40 && !readFileSync(join(ws, "app.py"), "utf8").includes("numba.njit"); i++) {
      await page.waitForTimeout(250);
    }
    const after = readFileSync(join(ws, "app.py"), "utf8");
    if (!after.includes("@numba.njit")) throw new Error("the accepted winner did not reach the file");
    log("accepted winner saved to app.py: OK");
    // The profile no longer measures the function: its lens says so until the program is profiled again.
    await page.locator(".explorer-folders-view .monaco-list-row", { hasText: "app.py" }).first().click();
    await page.locator(".codelens-decoration", { hasText: "changed since this profile" }).first()
      .waitFor({ timeout: 30000 });
    await page.screenshot({ path: join(shots, "changed-since-profile.png") });
    log("lens marks the accepted function as changed since the profile: OK");
    await runCommand(page, "redline: Profile again and compare");
    const change = page.locator(".notifications-toasts .notification-toast", { hasText: "the program:" }).first();
    await change.waitFor({ timeout: 180000 });
    const said = (await change.innerText()).replace(/\s+/g, " ");
    if (!/verified [\d.]+x, at \d+% of the program it predicted [\d.]+x/.test(said)) {
      throw new Error(`the re-profile does not put the program's change next to the winner's: ${said}`);
    }
    await page.locator(".codelens-decoration", { hasText: "changed since this profile" }).first()
      .waitFor({ state: "detached", timeout: 30000 });
    await page.screenshot({ path: join(shots, "profile-again.png") });
    log(`profiled again: ${said}`);
    // The two recordings as a differential flame graph: stacks coloured by how their share changed.
    await runCommand(page, "redline: Show differential flame graph");
    const diffView = page.frameLocator("iframe.webview").last().frameLocator("iframe#active-frame");
    await diffView.locator(".box").first().waitFor({ timeout: 30000 });
    const changed = await diffView.locator(".box.grew, .box.shrank").count();
    if (changed < 1) throw new Error("the differential flame graph colours no stack as changed");
    await page.screenshot({ path: join(shots, "diff-flame-graph.png") });
    await diffView.locator("#widths").click();
    await diffView.locator("#widths", { hasText: "old profile" }).waitFor({ timeout: 5000 });
    log(`differential flame graph: ${changed} stacks coloured by their change; widths toggle to the old profile`);
    await captureAndOptimise(page, ws, settings);
  } catch (err) {
    const pages = browser.contexts().flatMap((c) => c.pages());
    if (pages[0]) {
      await pages[0].screenshot({ path: join(work, "failure.png") }).catch(() => {});
      // What the notifications said (toasts hide after a while): the notification centre, opened.
      await pages[0].keyboard.press("Escape").catch(() => {});
      await runCommand(pages[0], "Notifications: Show Notifications").catch(() => {});
      await pages[0].waitForTimeout(500);
      await pages[0].screenshot({ path: join(work, "failure-notifications.png") }).catch(() => {});
    }
    console.error(`e2e failed: ${err.message}\nscreenshot: ${join(work, "failure.png")}\ncode-server log tail:\n${serverLog.slice(-3000)}`);
    process.exitCode = 1;
  } finally {
    await browser.close();
    server.kill("SIGTERM");
  }
}

/** A program that prints to stdout and stderr, whose hot function has no inputs: Capture and optimise
 * runs it (its output must not reach the server's protocol stream), the winner comes from the local
 * candidate files, and is reviewed and accepted; then a run is cancelled while a candidate spins. */
async function captureAndOptimise(page, ws, settings) {
  const use = async (candidates) => {
    writeFileSync(join(ws, ".vscode", "settings.json"), JSON.stringify({
      ...settings, "redline.candidatesDir": candidates, "redline.builtinProposers": false,
      "redline.captureCommand": `${python} orders.py 30`, "redline.candidateTimeout": 120,
    }, null, 2));
    await page.waitForTimeout(1000);  // the settings reach the server (workspace/didChangeConfiguration)
  };
  await use("candidates");
  await page.locator(".explorer-folders-view .monaco-list-row", { hasText: "orders.py" }).first().click();
  const source = readFileSync(join(ws, "orders.py"), "utf8").split("\n");
  await optimiseAt(page, source.findIndex((l) => l.startsWith("def parse")) + 3, true);
  const diffTab = page.locator(".tab", { hasText: "parse" }).filter({ hasText: "faster" }).first();
  await diffTab.waitFor({ timeout: 300000 });
  await page.waitForSelector(".monaco-diff-editor", { timeout: 30000 });
  await page.waitForTimeout(1000);
  await page.screenshot({ path: join(shots, "capture-and-optimise.png") });
  log(`captured while it printed, optimised from the candidate files: ${(await diffTab.innerText()).replace(/\s+/g, " ")}`);
  const toast = page.locator(".notifications-toasts .notification-toast", { hasText: "parse" });
  await toast.locator(".monaco-button", { hasText: "Accept" }).first().click();
  await diffTab.waitFor({ state: "detached", timeout: 30000 });
  await page.keyboard.press("Control+S");
  for (let i = 0; i < 40 && !readFileSync(join(ws, "orders.py"), "utf8").includes("line.split"); i++) {
    await page.waitForTimeout(250);
  }
  if (!readFileSync(join(ws, "orders.py"), "utf8").includes('line.split(",")')) {
    throw new Error("the accepted parse did not reach orders.py");
  }
  log("accepted parse saved to orders.py: OK");
  // Cancel mid-run: parse again (its calls are captured now), from a candidate that never returns; the
  // progress notification's Cancel ends the run.
  await use("candidates-spin");
  await page.locator(".explorer-folders-view .monaco-list-row", { hasText: "orders.py" }).first().click();
  const now = readFileSync(join(ws, "orders.py"), "utf8").split("\n");
  await optimiseAt(page, now.findIndex((l) => l.startsWith("def parse")) + 2, false);
  // The run's progress notification (a toast hides after a while: the notification centre lists it).
  await runCommand(page, "Notifications: Show Notifications");
  const progress = page.locator(".notifications-center .notification-list-item", { hasText: "parse_spins" }).first();
  await progress.waitFor({ timeout: 120000 });
  await page.screenshot({ path: join(shots, "cancel-mid-run.png") });
  await progress.locator(".monaco-button", { hasText: "Cancel" }).first().click();
  const cancelled = page.locator(".notification-list-item", { hasText: "parse: cancelled" }).first();
  await cancelled.waitFor({ timeout: 30000 });
  await page.screenshot({ path: join(shots, "cancelled.png") });
  log(`cancelled mid-run: ${(await cancelled.innerText()).replace(/\s+/g, " ")}`);
}

/** Optimise the function at 1-based `line` of orders.py; `capture`: it has no inputs yet, so
 * the editor asks to capture its calls first, and the test says yes. */
async function optimiseAt(page, line, capture) {
  await page.locator(".tab.active", { hasText: "orders.py" }).first().waitFor({ timeout: 30000 });
  await page.locator(".editor-group-container.active .monaco-editor .view-lines").first().click();
  await page.keyboard.press("Control+G");
  await page.waitForSelector(".quick-input-widget input", { timeout: 30000 });
  await page.keyboard.type(String(line));
  await page.keyboard.press("Enter");
  await runCommand(page, "redline: Optimise hotspot");
  if (!capture) return;
  const ask = page.locator(".notifications-toasts .notification-toast", { hasText: "has no inputs" }).first();
  await ask.waitFor({ timeout: 60000 });
  await ask.locator(".monaco-button", { hasText: "Capture and optimise" }).click();
}

/** Run a command from the palette by its title ("Show flame graph" is not "Show differential flame graph"). */
async function runCommand(page, title) {
  await page.keyboard.press("Control+Shift+P");
  await page.waitForSelector(".quick-input-widget input", { timeout: 30000 });
  await page.keyboard.type(title);
  const name = title.replace(/^redline: /, "");
  let row = page.locator(".quick-input-list .monaco-list-row").filter({ hasText: name });
  if (!name.includes("differential")) row = row.filter({ hasNotText: "differential" });
  row = row.first();
  await row.waitFor({ timeout: 30000 });
  await row.click();
}

await main();
