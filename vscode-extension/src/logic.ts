// Pure logic of the extension, kept free of the `vscode` module so it runs under `node --test`.

export interface HeatLine {
  line: number;
  heat: number;
  fraction: number;
}

export interface Winner {
  runId: string;
  uri: string;
  function: string;
  speedup: number;
  ci95: [number, number];
  diff: string;
  original: string;
  proposed: string;
  title: string;
  verified?: string; // what it was checked on and what the edit adds
}

export const HEAT_LEVELS = 8;

/** Lines grouped by heat level (1..HEAT_LEVELS); level 0 (cold) is left out. */
export function heatBuckets(lines: HeatLine[], levels = HEAT_LEVELS): Map<number, number[]> {
  const buckets = new Map<number, number[]>();
  for (const l of lines) {
    if (!(l.heat > 0)) continue;
    const level = Math.min(levels, Math.max(1, Math.ceil(l.heat * levels)));
    const list = buckets.get(level) ?? [];
    list.push(l.line);
    buckets.set(level, list);
  }
  return buckets;
}

/** Background colour of a heat level: transparent red growing with heat. */
export function heatColour(level: number, levels = HEAT_LEVELS): string {
  const alpha = (0.06 + 0.34 * (level / levels)).toFixed(3);
  return `rgba(255, 64, 0, ${alpha})`;
}

/** The diff editor's title for a verified winner. */
export function winnerTitle(w: Pick<Winner, "function" | "speedup" | "ci95">): string {
  const [lo, hi] = w.ci95;
  return `redline: ${w.function} — ${w.speedup.toFixed(2)}x faster (95% CI ${lo.toFixed(2)}–${hi.toFixed(2)})`;
}

/**
 * Which interpreter starts the server: the `redline.interpreter` setting when set, else the Python
 * extension's active environment, else `python3` from PATH.
 */
export function pickInterpreter(setting: string | undefined, fromPythonExtension: string | undefined): string {
  if (setting && setting.trim()) return setting.trim();
  if (fromPythonExtension && fromPythonExtension.trim()) return fromPythonExtension.trim();
  return "python3";
}

export function serverArgs(): string[] {
  return ["-m", "redline.cli", "serve"];
}

/** The server's environment: the parent's, plus the API key from secret storage (never a setting). */
export function serverEnv(base: NodeJS.ProcessEnv, apiKey: string | undefined): NodeJS.ProcessEnv {
  const env = { ...base };
  if (apiKey) env.OPENAI_API_KEY = apiKey;
  return env;
}

/** HTML of the flame-graph webview: speedscope's offline bundle under a strict content-security policy. */
export function flameGraphHtml(opts: { cspSource: string; nonce: string; indexScript: string; profileUrl: string;
                                       cssUrl: string; title: string }): string {
  const csp = [
    "default-src 'none'",
    `img-src ${opts.cspSource} data:`,
    `style-src ${opts.cspSource} 'unsafe-inline'`,
    `script-src 'nonce-${opts.nonce}' ${opts.cspSource}`,
    `connect-src ${opts.cspSource}`,
    `font-src ${opts.cspSource}`,
  ].join("; ");
  const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/"/g, "&quot;").replace(/</g, "&lt;");
  return `<!DOCTYPE html>
<html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<title>${esc(opts.title)}</title>
<link rel="stylesheet" href="${esc(opts.cssUrl)}">
</head><body>
<script nonce="${opts.nonce}">window.location.hash = ${JSON.stringify("#profileURL=" + encodeURIComponent(opts.profileUrl) + "&title=" + encodeURIComponent(opts.title) + "&view=left-heavy")};</script>
<script nonce="${opts.nonce}" src="${esc(opts.indexScript)}"></script>
<script nonce="${opts.nonce}">${REVEAL_SCRIPT}</script>
</body></html>`;
}

// Clicking a frame in speedscope's canvas reveals its source: at the click, speedscope's hover
// tooltip shows the frame's "file:line"; the webview posts it to the extension. The other way, the
// extension posts the function at the editor's cursor ({type: "select", name}), which the webview
// enters in speedscope's search: its frames are highlighted, the rest dimmed. The search bar is opened
// once, when the chart is first drawn (as Ctrl+F opens it; the new panel has the focus then); filling
// it later never takes the focus from the editor. Closed by the user, it stays closed.
const REVEAL_SCRIPT = `(() => {
  const vscode = acquireVsCodeApi();
  const openSearch = (tries) => {  // until the chart's view is mounted and opens it (a second or two)
    const input = document.querySelector("input");
    if (input) { input.blur(); return; }
    if (tries <= 0) return;
    if (document.querySelector("canvas")) {
      document.dispatchEvent(new KeyboardEvent("keydown", { key: "f", ctrlKey: true, bubbles: true }));
    }
    setTimeout(() => openSearch(tries - 1), 100);
  };
  openSearch(100);
  window.addEventListener("message", (event) => {
    const m = event.data;
    const input = document.querySelector("input");
    if (!m || m.type !== "select" || typeof m.name !== "string" || !input) return;
    input.value = m.name;
    input.dispatchEvent(new Event("input", { bubbles: true }));
  });
  document.addEventListener("click", (event) => {
    if (!(event.target instanceof HTMLCanvasElement)) return;
    for (const el of document.querySelectorAll("div")) {
      if (el.childElementCount !== 0) continue;
      const m = /^(.*[./].*\\S):(\\d+)$/.exec((el.textContent || "").trim());
      if (m) { vscode.postMessage({ type: "reveal", file: m[1], line: Number(m[2]) }); return; }
    }
  }, true);
})();`;

/** Where a frame the flame graph names lives: absolute paths as they are, others under the workspace. */
export function revealTarget(msg: unknown, workspaceRoot: string | undefined): { file: string; line: number } | undefined {
  if (typeof msg !== "object" || msg === null) return undefined;
  const m = msg as { type?: unknown; file?: unknown; line?: unknown };
  if (m.type !== "reveal" || typeof m.file !== "string" || typeof m.line !== "number" || !(m.line >= 1)) return undefined;
  if (m.file.startsWith("<")) return undefined; // <frozen ...>, <string>: no file to open
  const file = m.file.startsWith("/") || !workspaceRoot ? m.file : `${workspaceRoot.replace(/\/$/, "")}/${m.file}`;
  return { file, line: Math.floor(m.line) };
}

export function nonce(random: () => number = Math.random): string {
  const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  let out = "";
  for (let i = 0; i < 32; i++) out += chars[Math.floor(random() * chars.length)];
  return out;
}

/** Status-bar text from the server's `redline/profileLoaded`. */
export interface LoadedTrace { trace: string; samples: number; recordedAt: string; command: string[] }

/** The status item's tooltip: each loaded trace with its samples, when and how it was recorded, the
 * older recordings a newer one replaced, and any trace that could not be read. */
export function statusTooltip(p: { traces: string[]; errors: string[]; loaded?: LoadedTrace[]; superseded?: string[] }
                              | undefined): string {
  if (!p) return "redline: no profile loaded";
  const lines = (p.loaded ?? p.traces.map((trace) => ({ trace, samples: 0, recordedAt: "", command: [] })))
    .map((t) => `${t.trace}: ${t.samples.toLocaleString("en-US")} samples` +
                (t.recordedAt ? `, recorded ${t.recordedAt}` : "") + (t.command.length ? ` (${t.command.join(" ")})` : ""));
  if (p.superseded?.length) lines.push(`replaced by a newer recording: ${p.superseded.join(", ")}`);
  return [...lines, ...p.errors].join("\n") || "redline: no profile loaded";
}

export function statusText(p: { traces: string[]; samples: number; errors: string[] } | undefined,
                           running: number): string {
  if (running > 0) return `$(sync~spin) redline: optimising (${running})`;
  if (!p || p.traces.length === 0) return p && p.errors.length ? "$(warning) redline: trace error" : "redline: no profile";
  return `$(flame) redline: ${p.traces.length} trace${p.traces.length === 1 ? "" : "s"} · ${p.samples.toLocaleString("en-US")} samples`;
}

/** A trace with its frames merged by function, as the lenses count them: py-spy records a frame per
 * line, so one function shows as several boxes. Each function keeps the first line it was sampled at
 * (clicking it opens the function there). Speedscope JSON (sampled and evented profiles) and py-spy's
 * collapsed stacks; anything else is returned as it is. */
export function mergeFramesByFunction(text: string): string {
  const trimmed = text.trimStart();
  if (trimmed.startsWith("{")) {
    let doc: { shared?: { frames?: { name: string; file?: string; line?: number }[] }; profiles?: unknown[] };
    try {
      doc = JSON.parse(text);
    } catch {
      return text;
    }
    const frames = doc.shared?.frames;
    if (!Array.isArray(frames) || !Array.isArray(doc.profiles)) return text;
    const merged: { name: string; file?: string; line?: number }[] = [];
    const byKey = new Map<string, number>();
    const remap = frames.map((f) => {
      const key = `${f.name}\u0000${f.file ?? ""}`;
      let at = byKey.get(key);
      if (at === undefined) {
        at = merged.length;
        byKey.set(key, at);
        merged.push({ ...f });
      } else if (f.line !== undefined && (merged[at].line === undefined || f.line < (merged[at].line as number))) {
        merged[at].line = f.line;
      }
      return at;
    });
    for (const p of doc.profiles as { type?: string; samples?: number[][]; events?: { frame: number }[] }[]) {
      if (p.type === "sampled" && Array.isArray(p.samples)) p.samples = p.samples.map((s) => s.map((i) => remap[i]));
      if (p.type === "evented" && Array.isArray(p.events)) p.events = p.events.map((e) => ({ ...e, frame: remap[e.frame] }));
    }
    doc.shared = { ...doc.shared, frames: merged };
    return JSON.stringify(doc);
  }
  // Collapsed stacks: "name (file:line);name (file:line) count"; each function at its first line seen.
  const first = new Map<string, number>();
  const frame = /^(.*) \((.*):(\d+)\)$/;
  const lines = text.split("\n");
  for (const line of lines) {
    for (const f of line.slice(0, line.lastIndexOf(" ")).split(";")) {
      const m = frame.exec(f);
      if (m) {
        const key = `${m[1]} (${m[2]}`;
        first.set(key, Math.min(first.get(key) ?? Infinity, Number(m[3])));
      }
    }
  }
  return lines.map((line) => {
    const cut = line.lastIndexOf(" ");
    if (cut < 0) return line;
    const stack = line.slice(0, cut).split(";").map((f) => {
      const m = frame.exec(f);
      return m ? `${m[1]} (${m[2]}:${first.get(`${m[1]} (${m[2]}`)})` : f;
    });
    return `${stack.join(";")}${line.slice(cut)}`;
  }).join("\n");
}

/** A process the attach pick list offers: a Python interpreter's, with its command line. */
export interface ProcessItem {
  pid: number;
  command: string;
}

/**
 * The Python processes among `/proc`-style entries (pid and NUL-separated command line), leaving out
 * `exclude` (the language server itself) and py-spy: what "Attach to process…" lists, newest first.
 */
export function pythonProcesses(entries: { pid: number; cmdline: string }[], exclude: number[]): ProcessItem[] {
  return entries
    .filter((e) => !exclude.includes(e.pid))
    .map((e) => ({ pid: e.pid, argv: e.cmdline.split("\0").filter((a) => a.length > 0) }))
    .filter((e) => e.argv.length > 0 && /(^|\/)python[\d.]*$/.test(e.argv[0]) &&
                   !e.argv.some((a) => /(^|\/)py-spy$/.test(a)))
    .sort((a, b) => b.pid - a.pid)
    .map((e) => ({ pid: e.pid, command: e.argv.join(" ") }));
}

/**
 * The qualified name of the function whose body holds 0-based `line` in Python source `lines`
 * (`Class.method`, `outer.<locals>.inner` as Python spells it), from the `def` and `class` lines and
 * their indentation; undefined outside any function.
 */
export function functionAt(lines: string[], line: number): string | undefined {
  const indent = (s: string) => s.length - s.trimStart().length;
  const chain: { name: string; kind: string; indent: number }[] = [];
  for (let i = 0; i <= Math.min(line, lines.length - 1); i++) {
    const text = lines[i];
    if (!text.trim() || text.trimStart().startsWith("#")) continue;
    while (chain.length && indent(text) <= chain[chain.length - 1].indent) chain.pop();
    const m = /^\s*(?:async\s+)?(def|class)\s+([A-Za-z_]\w*)/.exec(text);
    if (m) chain.push({ name: m[2], kind: m[1], indent: indent(text) });
  }
  if (!chain.some((c) => c.kind === "def")) return undefined;
  while (chain[chain.length - 1].kind !== "def") chain.pop();
  return chain.map((c, i) => (i > 0 && chain[i - 1].kind === "def" ? `<locals>.${c.name}` : c.name)).join(".");
}


/**
 * The call stacks of a trace, as paths of functions ("main (app.py);parse (app.py)") with their weight:
 * a speedscope file's sampled profiles, or py-spy's collapsed stacks. Lines are dropped (a function is
 * one frame, as the lenses count it); a file that is neither gives no stacks.
 */
export function stacksOf(text: string): Map<string, number> {
  const out = new Map<string, number>();
  const add = (path: string[], weight: number) => {
    if (path.length && weight > 0) out.set(path.join(";"), (out.get(path.join(";")) ?? 0) + weight);
  };
  const base = (file: string | undefined) => (file ?? "").split("/").pop() ?? "";
  if (text.trimStart().startsWith("{")) {
    let doc: { shared?: { frames?: { name: string; file?: string }[] };
               profiles?: { type?: string; samples?: number[][]; weights?: number[] }[] };
    try {
      doc = JSON.parse(text);
    } catch {
      return out;
    }
    const names = (doc.shared?.frames ?? []).map((f) => `${f.name} (${base(f.file)})`);
    for (const p of doc.profiles ?? []) {
      if (p.type !== "sampled" || !Array.isArray(p.samples)) continue;
      p.samples.forEach((s, i) => add(s.map((f) => names[f] ?? "?"), p.weights?.[i] ?? 1));
    }
    return out;
  }
  const frame = /^(.*) \((.*):\d+\)$/;
  for (const line of text.split("\n")) {
    const cut = line.lastIndexOf(" ");
    const weight = Number(line.slice(cut + 1));
    if (cut <= 0 || !Number.isFinite(weight)) continue;
    add(line.slice(0, cut).split(";").map((f) => {
      const m = frame.exec(f);
      return m ? `${m[1]} (${base(m[2])})` : f;
    }), weight);
  }
  return out;
}

/** A node of the differential flame graph: its share of each trace's total weight (inclusive). */
export interface DiffNode {
  name: string;
  before: number;
  after: number;
  children: DiffNode[];
}

/** The two traces' stacks as one tree of shares: `before` and `after` of every node, 0 where absent. */
export function diffTree(before: Map<string, number>, after: Map<string, number>): DiffNode {
  const root: DiffNode = { name: "all", before: 0, after: 0, children: [] };
  const put = (stacks: Map<string, number>, side: "before" | "after") => {
    const total = [...stacks.values()].reduce((a, b) => a + b, 0) || 1;
    for (const [path, weight] of stacks) {
      let node = root;
      node[side] += weight / total;
      for (const name of path.split(";")) {
        let child = node.children.find((c) => c.name === name);
        if (!child) {
          child = { name, before: 0, after: 0, children: [] };
          node.children.push(child);
        }
        child[side] += weight / total;
        node = child;
      }
    }
  };
  put(before, "before");
  put(after, "after");
  const order = (n: DiffNode) => {
    n.children.sort((a, b) => b.after - a.after || b.before - a.before);  // Left Heavy, by the new profile
    n.children.forEach(order);
  };
  order(root);
  return root;
}

/** A node's colour: red where its share grew, blue where it shrank, by how much (10 points is full). */
export function diffColour(n: Pick<DiffNode, "before" | "after">): string {
  const delta = n.after - n.before;
  const strength = Math.min(1, Math.abs(delta) / 0.1);
  if (strength < 0.02) return "rgba(128, 128, 128, 0.35)";
  return delta > 0 ? `rgba(220, 60, 40, ${0.25 + 0.75 * strength})` : `rgba(40, 110, 220, ${0.25 + 0.75 * strength})`;
}

/** HTML of the differential flame graph: an icicle of `root` (widths from the new profile, or from the
 * old one with the toggle, so what vanished shows), coloured by change; each box's tooltip its shares. */
export function diffFlameGraphHtml(root: DiffNode, opts: { cspSource: string; nonce: string; title: string }): string {
  const csp = [`default-src 'none'`, `style-src ${opts.cspSource} 'unsafe-inline'`, `script-src 'nonce-${opts.nonce}'`].join("; ");
  const data = JSON.stringify(root).replace(/</g, "\\u003c");
  const esc = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;");
  return `<!DOCTYPE html>
<html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="${csp}">
<title>${esc(opts.title)}</title>
<style>
body { margin: 0; font: 12px monospace; color: var(--vscode-foreground); background: var(--vscode-editor-background); }
#bar { padding: 6px 8px; display: flex; gap: 12px; align-items: center; }
#chart { position: relative; margin: 0 8px; }
.box { position: absolute; height: 18px; box-sizing: border-box; border: 1px solid var(--vscode-editor-background);
       overflow: hidden; white-space: nowrap; padding: 1px 3px; color: #fff; }
.grew { color: #fff; } .shrank { color: #fff; }
</style></head><body>
<div id="bar"><b>${esc(opts.title)}</b><button id="widths">widths: new profile</button>
<span>red: more of the program than before · blue: less · hover a box for its shares</span></div>
<div id="chart"></div>
<script nonce="${opts.nonce}">
(() => {
  const root = ${data};
  const colour = ${diffColour.toString()};
  let side = "after";
  const chart = document.getElementById("chart");
  const draw = () => {
    chart.textContent = "";
    const width = chart.clientWidth || 800;
    let depth = 0;
    const place = (node, x, w, level) => {
      depth = Math.max(depth, level);
      if (w * width < 1) return;
      if (level > 0) {
        const box = document.createElement("div");
        const delta = node.after - node.before;
        box.className = "box " + (delta > 0.001 ? "grew" : delta < -0.001 ? "shrank" : "same");
        box.style.left = (x * width) + "px";
        box.style.width = (w * width) + "px";
        box.style.top = ((level - 1) * 18) + "px";
        box.style.background = colour(node);
        box.textContent = node.name;
        box.title = node.name + ": " + (node.before * 100).toFixed(1) + "% before, " + (node.after * 100).toFixed(1) +
          "% after (" + (delta >= 0 ? "+" : "") + (delta * 100).toFixed(1) + "pt)";
        chart.appendChild(box);
      }
      let at = x;
      for (const child of node.children) {
        const cw = node[side] > 0 ? w * child[side] / node[side] : 0;
        place(child, at, cw, level + 1);
        at += cw;
      }
    };
    place(root, 0, 1, 0);
    chart.style.height = (depth * 18 + 4) + "px";
  };
  document.getElementById("widths").addEventListener("click", (e) => {
    side = side === "after" ? "before" : "after";
    e.target.textContent = "widths: " + (side === "after" ? "new" : "old") + " profile";
    draw();
  });
  window.addEventListener("resize", draw);
  draw();
})();
</script>
</body></html>`;
}

/** `run` made to run one call at a time, in the order of the calls: a call waits for the one before it
 * to end. A call that fails is reported to `onError` (its own promise still rejects) and does not stop
 * the next. The server's restarts go through this: two at once would leave an orphaned client. */
export function oneAtATime(run: () => Promise<void>, onError: (err: unknown) => void): () => Promise<void> {
  let last: Promise<void> = Promise.resolve();
  return () => {
    const next = last.then(run);
    last = next.catch(onError);
    return next;
  };
}
