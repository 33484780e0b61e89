// The VS Code client: starts the Python server, shows what it sends, forwards what the user does.
// Every decision lives in the server (redline.server); this file holds none.
import { ChildProcess, spawn } from "child_process";
import * as fs from "fs";
import * as path from "path";
import * as vscode from "vscode";
import {
  ClientCapabilities,
  LanguageClient,
  LanguageClientOptions,
  ServerOptions,
  StaticFeature,
} from "vscode-languageclient/node";
import {
  diffFlameGraphHtml,
  diffTree,
  flameGraphHtml,
  functionAt,
  HEAT_LEVELS,
  HeatLine,
  heatBuckets,
  heatColour,
  mergeFramesByFunction,
  nonce,
  oneAtATime,
  pickInterpreter,
  pythonProcesses,
  revealTarget,
  serverArgs,
  serverEnv,
  stacksOf,
  statusText,
  statusTooltip,
  type LoadedTrace,
  Winner,
  winnerTitle,
} from "./logic";

const SECRET_KEY = "redline.llmApiKey";
const WINNER_SCHEME = "redline-winner";

let client: LanguageClient | undefined;
let serverProcess: ChildProcess | undefined;
let restarting: (() => Promise<void>) | undefined;
let output: vscode.OutputChannel;
let status: vscode.StatusBarItem;
let heatOn = true;
const heat = new Map<string, HeatLine[]>();
const winners = new Map<string, Winner>();
let lastProfile: { traces: string[]; samples: number; errors: string[]; loaded?: LoadedTrace[]; superseded?: string[] }
  | undefined;
let running = 0;
const decorations: vscode.TextEditorDecorationType[] = [];

class WinnerReview implements StaticFeature {
  fillClientCapabilities(capabilities: ClientCapabilities): void {
    capabilities.experimental = { ...(capabilities.experimental as object), redlineWinnerReview: true };
  }
  initialize(): void {}
  getState() {
    return { kind: "static" as const };
  }
  clear(): void {}
}

async function interpreter(): Promise<string> {
  const setting = vscode.workspace.getConfiguration("redline").get<string>("interpreter");
  let fromPython: string | undefined;
  const py = vscode.extensions.getExtension("ms-python.python");
  if (py) {
    try {
      const api = py.isActive ? py.exports : await py.activate();
      const env = api?.environments?.getActiveEnvironmentPath?.();
      const resolved = env ? await api.environments.resolveEnvironment(env) : undefined;
      fromPython = resolved?.executable?.uri?.fsPath ?? env?.path;
    } catch (err) {
      output.appendLine(`redline: could not ask the Python extension for an interpreter: ${err}`);
    }
  }
  return pickInterpreter(setting, fromPython);
}

function settingsObject(): Record<string, unknown> {
  const cfg = vscode.workspace.getConfiguration("redline");
  const out: Record<string, unknown> = {};
  const props = vscode.extensions.getExtension("redline-dev.redline")?.packageJSON?.contributes?.configuration?.properties ?? {};
  for (const key of Object.keys(props)) {
    const name = key.replace(/^redline\./, "");
    if (name !== "interpreter") out[name] = cfg.get(name);
  }
  return out;
}

async function startClient(context: vscode.ExtensionContext): Promise<void> {
  const python = await interpreter();
  const apiKey = await context.secrets.get(SECRET_KEY);
  output.appendLine(`redline: starting the server with ${python}`);
  // The extension starts the server process itself, so that a restart can end it even when its
  // connection is already broken (the client's own stop() then never returns an answer).
  const serverOptions: ServerOptions = async () => {
    serverProcess = spawn(python, serverArgs(), { env: serverEnv(process.env, apiKey) });
    return serverProcess;
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: "file", language: "python" }],
    outputChannel: output,
    initializationOptions: settingsObject(),
    synchronize: { configurationSection: "redline" },
  };
  client = new LanguageClient("redline", "redline", serverOptions, clientOptions);
  client.registerFeature(new WinnerReview());
  client.onNotification("redline/profileLoaded", (p) => {
    lastProfile = p;
    refreshStatus();
  });
  client.onNotification("redline/lineHeat", (p: { uri: string; lines: HeatLine[] }) => {
    heat.set(p.uri, p.lines);
    for (const editor of vscode.window.visibleTextEditors) {
      if (editor.document.uri.toString() === p.uri) paintHeat(editor);
    }
  });
  client.onNotification("redline/winner", (w: Winner) => {
    running = Math.max(0, running - 1);
    refreshStatus();
    winners.set(w.runId, w);
    void reviewWinner(w);
  });
  client.onNotification("redline/runFinished", () => {
    running = Math.max(0, running - 1);
    refreshStatus();
  });
  // A run without a winner offers the next step (an LLM endpoint, candidate files): its setting, opened.
  client.onNotification("redline/openSetting", (p: { setting: string }) => {
    void vscode.commands.executeCommand("workbench.action.openSettings", p.setting);
  });
  await client.start();
}

function refreshStatus(): void {
  status.text = statusText(lastProfile, running);
  status.tooltip = statusTooltip(lastProfile);
  status.show();
}

function paintHeat(editor: vscode.TextEditor): void {
  const lines = heatOn ? heat.get(editor.document.uri.toString()) ?? [] : [];
  const buckets = heatBuckets(lines);
  for (let level = 1; level <= HEAT_LEVELS; level++) {
    const ranges = (buckets.get(level) ?? []).map((l) => new vscode.Range(l, 0, l, 0));
    editor.setDecorations(decorations[level - 1], ranges);
  }
}

function winnerUri(w: Winner): vscode.Uri {
  const file = vscode.Uri.parse(w.uri);
  return vscode.Uri.from({ scheme: WINNER_SCHEME, path: file.path, query: `run=${w.runId}` });
}

async function reviewWinner(w: Winner): Promise<void> {
  await vscode.commands.executeCommand("vscode.diff", vscode.Uri.parse(w.uri), winnerUri(w), winnerTitle(w));
  const message = w.verified ? `${winnerTitle(w)}. ${w.verified}` : winnerTitle(w);
  const choice = await vscode.window.showInformationMessage(message, "Accept", "Reject");
  if (choice === "Accept") await acceptWinner(w.runId);
  else if (choice === "Reject") await rejectWinner(w.runId);
}

function runIdOf(arg: unknown): string | undefined {
  if (typeof arg === "string") return arg;
  const uri = arg instanceof vscode.Uri ? arg : vscode.window.activeTextEditor?.document.uri;
  if (uri?.scheme === WINNER_SCHEME) return new URLSearchParams(uri.query).get("run") ?? undefined;
  const ids = [...winners.keys()];
  return ids[ids.length - 1];
}

async function acceptWinner(arg?: unknown): Promise<void> {
  const runId = runIdOf(arg);
  if (!runId || !client) return;
  const result = (await client.sendRequest("workspace/executeCommand", {
    command: "redline.applyWinner",
    arguments: [{ runId }],
  })) as { applied?: boolean; reason?: string; error?: string; reprofile?: boolean };
  if (result?.applied) {
    winners.delete(runId);
    await closeReview(runId);
    const again = result.reprofile ? ["Profile again and compare"] : [];
    const choice = await vscode.window.showInformationMessage("redline: winner applied", ...again);
    if (choice) await profileAgain();
  } else {
    void vscode.window.showWarningMessage(`redline: not applied: ${result?.reason ?? result?.error ?? "unknown"}`);
  }
}

/** `redline: Attach to process…`: pick a running Python process; the server samples it in windows of a
 * few seconds and the heat, hints and lenses fill in while it runs (its progress's Cancel stops it). */
async function attachProcess(): Promise<void> {
  if (!client) return;
  const entries: { pid: number; cmdline: string }[] = [];
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      entries.push({ pid: Number(name), cmdline: fs.readFileSync(`/proc/${name}/cmdline`, "latin1") });
    } catch { /* gone, or not ours to read */ }
  }
  const items = pythonProcesses(entries, [process.pid, serverProcess?.pid ?? -1]).map((p) =>
    ({ label: `${p.pid}`, description: p.command, pid: p.pid }));
  if (items.length === 0) {
    void vscode.window.showInformationMessage("redline: no running Python process to attach to");
    return;
  }
  const pick = await vscode.window.showQuickPick(items, { title: "redline: attach to a Python process",
                                                          matchOnDescription: true });
  if (pick) await serverCommand("redline.attach", { pid: pick.pid });
}

/** A server command run for the user: the server reports its progress; a refusal is shown as a warning. */
async function serverCommand(name: string, ...args: unknown[]): Promise<void> {
  if (!client) return;
  try {
    await client.sendRequest("workspace/executeCommand", { command: name, arguments: args });
  } catch (err) {
    void vscode.window.showWarningMessage(`redline: ${err instanceof Error ? err.message : err}`);
  }
}

/** `redline: Capture while it runs`: the server starts the program (redline.captureCommand, else the last
 * profiled command) with the hot functions' calls recorded while it serves; the progress notification
 * counts the calls kept, and its Cancel stops the program as Ctrl-C would, keeping them for Optimise. */
async function captureService(): Promise<void> {
  await serverCommand("redline.captureService");
}

/** `redline: Profile again and compare`: the last profiled command run again under py-spy (the server
 * says the program's change and each accepted winner's verified and predicted speedups). */
async function profileAgain(): Promise<void> {
  await serverCommand("redline.reprofile");
}

async function rejectWinner(arg?: unknown): Promise<void> {
  const runId = runIdOf(arg);
  if (!runId || !client) return;
  await client.sendRequest("workspace/executeCommand", { command: "redline.discardWinner", arguments: [{ runId }] });
  winners.delete(runId);
  await closeReview(runId);
}

/** Close the run's diff review, wherever its tab is (focus may have moved since it opened). */
async function closeReview(runId: string): Promise<void> {
  const tabs = vscode.window.tabGroups.all.flatMap((g) => g.tabs).filter((t) =>
    t.input instanceof vscode.TabInputTextDiff && t.input.modified.scheme === WINNER_SCHEME &&
    new URLSearchParams(t.input.modified.query).get("run") === runId);
  if (tabs.length) await vscode.window.tabGroups.close(tabs);
}

async function optimiseHotspot(): Promise<void> {
  const editor = vscode.window.activeTextEditor;
  if (!editor) return;
  const actions = (await vscode.commands.executeCommand<(vscode.CodeAction | vscode.Command)[]>(
    "vscode.executeCodeActionProvider", editor.document.uri, editor.selection)) ?? [];
  const action = actions.find((a) => a.title === "Optimise hotspot");
  const command = action && "command" in action && typeof action.command === "object" ? action.command : undefined;
  if (!command) {
    void vscode.window.showInformationMessage("redline: the cursor is not in a hot function of the loaded profile");
    return;
  }
  running += 1;
  refreshStatus();
  await vscode.commands.executeCommand(command.command, ...(command.arguments ?? []));
}

/** `redline: Cancel optimise`: every run the server has in progress is cancelled (its progress then says
 * "cancelling…" until its workers and any LLM request are stopped). */
async function cancelRuns(): Promise<void> {
  if (!client) return;
  const state = await client.sendRequest<{ running?: string[] }>("workspace/executeCommand",
    { command: "redline.status", arguments: [] });
  const runs = state?.running ?? [];
  if (runs.length === 0) {
    void vscode.window.showInformationMessage("redline: no optimise run in progress");
    return;
  }
  for (const runId of runs) {
    await client.sendRequest("workspace/executeCommand", { command: "redline.cancel", arguments: [{ runId }] });
  }
}

async function loadProfileFile(uri?: vscode.Uri): Promise<void> {
  const target = uri ?? (await vscode.window.showOpenDialog({ canSelectMany: false, openLabel: "Load profile" }))?.[0];
  if (!target || !client) return;
  await client.sendRequest("workspace/executeCommand", { command: "redline.loadProfile", arguments: [target.fsPath] });
}

async function recordProfile(context: vscode.ExtensionContext): Promise<void> {
  const cmd = await vscode.window.showInputBox({ prompt: "Command to record with py-spy", value: "python main.py" });
  if (!cmd) return;
  const python = await interpreter();
  const terminal = vscode.window.createTerminal({ name: "redline profile" });
  terminal.show();
  terminal.sendText(`${python} -m redline.cli profile -- ${cmd}`);
  void context;
}

let flamePanel: vscode.WebviewPanel | undefined;
let flameSelected: string | undefined; // the function last highlighted in the flame graph

/** The editor's cursor moved: highlight its function in the flame graph, when one is open. */
function syncFlameGraph(e: vscode.TextEditorSelectionChangeEvent): void {
  const doc = e.textEditor.document;
  if (!flamePanel || doc.languageId !== "python" || doc.uri.scheme !== "file") return;
  const line = e.selections[0].active.line;
  const name = functionAt(doc.getText(new vscode.Range(0, 0, line + 1, 0)).split("\n"), line);
  if (!name || name === flameSelected) return;
  flameSelected = name;
  void flamePanel.webview.postMessage({ type: "select", name });
}

function showFlameGraph(context: vscode.ExtensionContext): void {
  const trace = lastProfile?.traces.find((t) => /\.(json|txt)$/.test(t));
  if (!trace) {
    void vscode.window.showInformationMessage("redline: load a py-spy or speedscope profile first");
    return;
  }
  const media = vscode.Uri.joinPath(context.extensionUri, "media", "speedscope");
  // Frames merged by function, as the lenses count them (py-spy records one per line), in the
  // extension's own storage; the flame graph takes the whole editor area, Left Heavy.
  const store = context.globalStorageUri;
  fs.mkdirSync(store.fsPath, { recursive: true });
  const merged = vscode.Uri.joinPath(store, `by-function-${path.basename(trace)}`);
  fs.writeFileSync(merged.fsPath, mergeFramesByFunction(fs.readFileSync(trace, "utf8")));
  flamePanel?.dispose();
  flameSelected = undefined;
  flamePanel = vscode.window.createWebviewPanel("redlineFlameGraph", `Flame graph: ${path.basename(trace)}`,
    vscode.ViewColumn.Active, { enableScripts: true, localResourceRoots: [media, store] });
  const web = flamePanel.webview;
  const panel = flamePanel;
  panel.onDidDispose(() => { if (flamePanel === panel) flamePanel = undefined; });
  web.onDidReceiveMessage(async (msg) => {
    const root = vscode.workspace.workspaceFolders?.[0]?.uri.fsPath;
    const where = revealTarget(msg, root);
    if (!where) return;
    try {
      const doc = await vscode.workspace.openTextDocument(vscode.Uri.file(where.file));
      const pos = new vscode.Position(where.line - 1, 0);
      await vscode.window.showTextDocument(doc, { viewColumn: vscode.ViewColumn.Beside, selection: new vscode.Range(pos, pos) });
    } catch (err) {
      void vscode.window.showWarningMessage(`redline: cannot open ${where.file}: ${err}`);
    }
  });
  web.html = flameGraphHtml({
    cspSource: web.cspSource,
    nonce: nonce(),
    indexScript: web.asWebviewUri(vscode.Uri.joinPath(media, "speedscope.js")).toString(),
    cssUrl: web.asWebviewUri(vscode.Uri.joinPath(media, "speedscope.css")).toString(),
    profileUrl: web.asWebviewUri(merged).toString(),
    title: path.basename(trace),
  });
}

/** `redline: Show differential flame graph`: the profile being compared (after Profile again and compare,
 * or redline.compareProfiles) against the earlier one, every stack coloured by how its share changed. */
async function showDiffFlameGraph(): Promise<void> {
  if (!client) return;
  const state = (await client.sendRequest("workspace/executeCommand", { command: "redline.status", arguments: [] })) as
    { comparing?: { before: string[]; after: string[] } | null };
  const c = state?.comparing;
  if (!c) {
    void vscode.window.showInformationMessage(
      "redline: nothing is being compared: run Profile again and compare, or compare with an earlier profile first");
    return;
  }
  const stacks = (paths: string[]) => {
    const all = new Map<string, number>();
    for (const p of paths) {
      for (const [k, v] of stacksOf(fs.readFileSync(p, "utf8"))) all.set(k, (all.get(k) ?? 0) + v);
    }
    return all;
  };
  let root;
  try {
    root = diffTree(stacks(c.before), stacks(c.after));
  } catch (err) {
    void vscode.window.showWarningMessage(`redline: cannot read the compared traces: ${err}`);
    return;
  }
  const title = `${c.before.map((p) => path.basename(p)).join(", ")} → ${c.after.map((p) => path.basename(p)).join(", ")}`;
  const panel = vscode.window.createWebviewPanel("redlineDiffFlameGraph", `Compared: ${title}`, vscode.ViewColumn.Active,
                                                 { enableScripts: true, localResourceRoots: [] });
  panel.webview.html = diffFlameGraphHtml(root, { cspSource: panel.webview.cspSource, nonce: nonce(), title });
}

async function setApiKey(context: vscode.ExtensionContext): Promise<void> {
  const key = await vscode.window.showInputBox({ prompt: "API key for the LLM endpoint (kept in VS Code's secret storage)",
                                                 password: true, ignoreFocusOut: true });
  if (key === undefined) return;
  await context.secrets.store(SECRET_KEY, key);
  await restart(context);
}

/** Stop the client and end its server process, whether or not the server still answers. */
async function stopServer(): Promise<void> {
  const old = client;
  const proc = serverProcess;
  client = undefined;
  serverProcess = undefined;
  try {
    if (old) await old.stop(2000);
  } catch (err) {
    output.appendLine(`redline: the server did not stop cleanly (${err}); ending its process`);
  }
  if (proc && proc.exitCode === null && proc.signalCode === null) proc.kill();
}

/** Restarts run one after another (logic.oneAtATime): two at once would leave an orphaned client and server. */
function restart(context: vscode.ExtensionContext): Promise<void> {
  restarting ??= oneAtATime(async () => {
    await stopServer();
    await startClient(context);
  }, (err) => output.appendLine(`redline: restart failed: ${err}`));
  return restarting();
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  output = vscode.window.createOutputChannel("redline");
  status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 10);
  status.command = "redline.showFlameGraph";
  for (let level = 1; level <= HEAT_LEVELS; level++) {
    decorations.push(vscode.window.createTextEditorDecorationType({
      isWholeLine: true, backgroundColor: heatColour(level), overviewRulerColor: heatColour(level),
      overviewRulerLane: vscode.OverviewRulerLane.Left,
    }));
  }
  context.subscriptions.push(output, status, ...decorations);
  context.subscriptions.push(vscode.workspace.registerTextDocumentContentProvider(WINNER_SCHEME, {
    provideTextDocumentContent(uri: vscode.Uri): string {
      const run = new URLSearchParams(uri.query).get("run") ?? "";
      return winners.get(run)?.proposed ?? "";
    },
  }));
  context.subscriptions.push(
    vscode.commands.registerCommand("redline.loadProfileFile", loadProfileFile),
    vscode.commands.registerCommand("redline.recordProfile", () => recordProfile(context)),
    vscode.commands.registerCommand("redline.optimiseHotspot", optimiseHotspot),
    vscode.commands.registerCommand("redline.showFlameGraph", () => showFlameGraph(context)),
    vscode.commands.registerCommand("redline.acceptWinner", acceptWinner),
    vscode.commands.registerCommand("redline.rejectWinner", rejectWinner),
    vscode.commands.registerCommand("redline.setApiKey", () => setApiKey(context)),
    vscode.commands.registerCommand("redline.restartServer", () => restart(context)),
    vscode.commands.registerCommand("redline.cancelRuns", cancelRuns),
    vscode.commands.registerCommand("redline.profileAgain", profileAgain),
    vscode.commands.registerCommand("redline.attachProcess", attachProcess),
    vscode.commands.registerCommand("redline.showDiffFlameGraph", showDiffFlameGraph),
    vscode.commands.registerCommand("redline.captureWhileItRuns", captureService),
    vscode.commands.registerCommand("redline.toggleHeat", () => {
      heatOn = !heatOn;
      vscode.window.visibleTextEditors.forEach(paintHeat);
    }),
    vscode.window.onDidChangeVisibleTextEditors((editors) => editors.forEach(paintHeat)),
    vscode.window.onDidChangeTextEditorSelection(syncFlameGraph),
  );
  refreshStatus();
  watchInterpreter(context);
  await startClient(context);
}

/** The server runs in the chosen interpreter: restart it when that choice changes (the
 * `redline.interpreter` setting, or the Python extension's active environment when it is unset). */
function watchInterpreter(context: vscode.ExtensionContext): void {
  context.subscriptions.push(vscode.workspace.onDidChangeConfiguration((e) => {
    if (e.affectsConfiguration("redline.interpreter")) void restart(context);
  }));
  const py = vscode.extensions.getExtension("ms-python.python");
  if (!py) return;
  void (async () => {
    try {
      const api = py.isActive ? py.exports : await py.activate();
      const onChange = api?.environments?.onDidChangeActiveEnvironmentPath;
      if (typeof onChange !== "function") return;
      context.subscriptions.push(onChange(() => {
        if (!vscode.workspace.getConfiguration("redline").get<string>("interpreter")) void restart(context);
      }));
    } catch (err) {
      output.appendLine(`redline: cannot follow the Python extension's interpreter: ${err}`);
    }
  })();
}

export async function deactivate(): Promise<void> {
  await stopServer();
}
