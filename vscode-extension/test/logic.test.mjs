// Unit tests of the extension's own logic (node --test), on the bundled out-test/logic.js.
import assert from "node:assert/strict";
import { test } from "node:test";
import { diffColour, diffFlameGraphHtml, diffTree, flameGraphHtml, functionAt, heatBuckets, stacksOf, heatColour, mergeFramesByFunction, nonce, oneAtATime, pickInterpreter, pythonProcesses, revealTarget, serverEnv, statusText, statusTooltip, winnerTitle } from "./logic.js";

test("heat buckets: hottest line at the top level, cold lines left out", () => {
  const b = heatBuckets([{ line: 3, heat: 1, fraction: 0.5 }, { line: 4, heat: 0.1, fraction: 0.05 },
                         { line: 5, heat: 0, fraction: 0 }], 8);
  assert.deepEqual(b.get(8), [3]);
  assert.deepEqual(b.get(1), [4]);
  assert.equal([...b.values()].flat().includes(5), false);
});

test("heat colour grows with level", () => {
  const alpha = (c) => Number(c.match(/([\d.]+)\)$/)[1]);
  assert.ok(alpha(heatColour(8)) > alpha(heatColour(1)));
});

test("winner title carries speedup and interval", () => {
  assert.equal(winnerTitle({ function: "f", speedup: 5.234, ci95: [4.8, 5.61] }),
    "redline: f — 5.23x faster (95% CI 4.80–5.61)");
});

test("interpreter: setting, then the Python extension, then python3", () => {
  assert.equal(pickInterpreter(" /venv/bin/python ", "/other/python"), "/venv/bin/python");
  assert.equal(pickInterpreter("", "/other/python"), "/other/python");
  assert.equal(pickInterpreter(undefined, undefined), "python3");
});

test("the API key reaches only the server's environment", () => {
  const base = { PATH: "/bin" };
  const env = serverEnv(base, "sk-secret");
  assert.equal(env.OPENAI_API_KEY, "sk-secret");
  assert.equal(base.OPENAI_API_KEY, undefined);
  assert.equal(serverEnv(base, undefined).OPENAI_API_KEY, undefined);
});

test("flame graph HTML: strict CSP, nonce on every script, no remote sources", () => {
  const html = flameGraphHtml({ cspSource: "vscode-resource:", nonce: "N0NCE", indexScript: "vscode-resource:/s.js",
                                profileUrl: "vscode-resource:/p.json", cssUrl: "vscode-resource:/s.css", title: "t<x>" });
  assert.match(html, /default-src 'none'/);
  assert.match(html, /script-src 'nonce-N0NCE'/);
  const scripts = html.match(/<script[^>]*>/g);
  assert.ok(scripts.every((s) => s.includes('nonce="N0NCE"')));
  assert.doesNotMatch(html, /https?:\/\//);
  assert.match(html, /t&lt;x>/);
});

test("nonce is 32 characters of [A-Za-z0-9]", () => {
  assert.match(nonce(), /^[A-Za-z0-9]{32}$/);
});

test("status text", () => {
  assert.equal(statusText(undefined, 0), "redline: no profile");
  assert.equal(statusText({ traces: ["a"], samples: 1234, errors: [] }, 0), "$(flame) redline: 1 trace · 1,234 samples");
  assert.match(statusText({ traces: [], samples: 0, errors: [] }, 2), /optimising \(2\)/);
});

test("status tooltip: what was loaded, when, from which command, and what a newer recording replaced", () => {
  const tip = statusTooltip({ traces: ["/w/.redline/b.json"], errors: ["x.json: bad"], superseded: ["/w/.redline/a.json"],
    loaded: [{ trace: "/w/.redline/b.json", samples: 1234, recordedAt: "2026-12-06T02:00:00+00:00", command: ["python", "app.py"] }] });
  assert.equal(tip, "/w/.redline/b.json: 1,234 samples, recorded 2026-12-06T02:00:00+00:00 (python app.py)\n"
                    + "replaced by a newer recording: /w/.redline/a.json\nx.json: bad");
  assert.equal(statusTooltip(undefined), "redline: no profile loaded");
});

test("reveal: frames map onto files, bad messages are ignored", () => {
  assert.deepEqual(revealTarget({ type: "reveal", file: "/abs/app.py", line: 12 }, "/ws"), { file: "/abs/app.py", line: 12 });
  assert.deepEqual(revealTarget({ type: "reveal", file: "pkg/mod.py", line: 3 }, "/ws/"), { file: "/ws/pkg/mod.py", line: 3 });
  assert.equal(revealTarget({ type: "reveal", file: "<frozen importlib._bootstrap>", line: 3 }, "/ws"), undefined);
  assert.equal(revealTarget({ type: "reveal", file: "a.py", line: 0 }, "/ws"), undefined);
  assert.equal(revealTarget("nonsense", "/ws"), undefined);
});

test("flame graph frames merged by function: one box per function, at its first line", () => {
  const doc = {
    shared: { frames: [{ name: "main", file: "app.py", line: 30 }, { name: "work", file: "app.py", line: 12 },
                       { name: "work", file: "app.py", line: 9 }, { name: "work", file: "lib.py", line: 3 }] },
    profiles: [{ type: "sampled", samples: [[0, 1], [0, 2], [0, 3]], weights: [1, 1, 1] },
               { type: "evented", events: [{ type: "O", frame: 2, at: 0 }, { type: "C", frame: 2, at: 1 }] }],
  };
  const out = JSON.parse(mergeFramesByFunction(JSON.stringify(doc)));
  assert.deepEqual(out.shared.frames, [{ name: "main", file: "app.py", line: 30 }, { name: "work", file: "app.py", line: 9 },
                                       { name: "work", file: "lib.py", line: 3 }]);
  assert.deepEqual(out.profiles[0].samples, [[0, 1], [0, 1], [0, 2]]);
  assert.deepEqual(out.profiles[1].events.map((e) => e.frame), [1, 1]);
  const collapsed = "main (app.py:30);work (app.py:12) 5\nmain (app.py:30);work (app.py:9) 2\n";
  assert.equal(mergeFramesByFunction(collapsed), "main (app.py:30);work (app.py:9) 5\nmain (app.py:30);work (app.py:9) 2\n");
  assert.equal(mergeFramesByFunction("not a trace"), "not a trace");
});

test("flame graph opens Left Heavy", () => {
  const html = flameGraphHtml({ cspSource: "vscode-resource:", nonce: "n", indexScript: "s.js", profileUrl: "p.json",
                                cssUrl: "s.css", title: "t" });
  assert.match(html, /&view=left-heavy/);
});

test("the attach pick list offers Python processes with their command lines, newest first", () => {
  const entries = [
    { pid: 10, cmdline: "/usr/bin/python3.12\x00app.py\x00--port\x008000\x00" },
    { pid: 11, cmdline: "bash\x00" },
    { pid: 12, cmdline: "/srv/venv/bin/python\x00-m\x00gunicorn\x00app:wsgi\x00" },
    { pid: 13, cmdline: "/usr/bin/python3\x00-m\x00redline.cli\x00serve\x00" },
    { pid: 14, cmdline: "/usr/local/bin/py-spy\x00record\x00--pid\x0010\x00" },
    { pid: 15, cmdline: "" },
  ];
  assert.deepEqual(pythonProcesses(entries, [13]), [
    { pid: 12, command: "/srv/venv/bin/python -m gunicorn app:wsgi" },
    { pid: 10, command: "/usr/bin/python3.12 app.py --port 8000" },
  ]);
});

test("the function at the cursor is named as Python qualifies it, for the flame graph's highlight", () => {
  const src = [
    "import os",                    // 0
    "",                             // 1
    "class Grid:",                  // 2
    "    size = 3",                 // 3
    "    def relax(self, n):",      // 4
    "        acc = 0",              // 5
    "        def step(i):",         // 6
    "            return i",         // 7
    "",                             // 8
    "        return acc",           // 9
    "",                             // 10
    "@decorated",                   // 11
    "async def main():",            // 12
    "    # a comment",              // 13
    "    await run()",              // 14
    "x = 1",                        // 15
  ];
  assert.equal(functionAt(src, 0), undefined);
  assert.equal(functionAt(src, 3), undefined);  // a class body is no function
  assert.equal(functionAt(src, 4), "Grid.relax");
  assert.equal(functionAt(src, 5), "Grid.relax");
  assert.equal(functionAt(src, 7), "Grid.relax.<locals>.step");
  assert.equal(functionAt(src, 9), "Grid.relax");
  assert.equal(functionAt(src, 14), "main");
  assert.equal(functionAt(src, 15), undefined);
});

test("the differential flame graph: stacks by function from both formats, shares before and after", () => {
  const raw = "main (app.py:30);parse (app.py:9) 60\nmain (app.py:31);parse (app.py:12) 20\nmain (app.py:32);total (app.py:20) 20\n";
  const before = stacksOf(raw);
  assert.deepEqual([...before], [["main (app.py);parse (app.py)", 80], ["main (app.py);total (app.py)", 20]]);
  const speedscope = JSON.stringify({
    shared: { frames: [{ name: "main", file: "/ws/app.py", line: 30 }, { name: "parse", file: "/ws/app.py", line: 9 },
                       { name: "total", file: "/ws/app.py", line: 20 }, { name: "split", file: "/ws/app.py", line: 40 }] },
    profiles: [{ type: "sampled", samples: [[0, 1], [0, 2], [0, 3]], weights: [0.01, 0.03, 0.01] }],
  });
  const after = stacksOf(speedscope);
  const root = diffTree(before, after);
  const main = root.children[0];
  assert.equal(main.name, "main (app.py)");
  assert.ok(Math.abs(main.before - 1) < 1e-9 && Math.abs(main.after - 1) < 1e-9);
  const by = Object.fromEntries(main.children.map((c) => [c.name, c]));
  assert.ok(Math.abs(by["parse (app.py)"].before - 0.8) < 1e-9 && Math.abs(by["parse (app.py)"].after - 0.2) < 1e-9);
  assert.equal(by["split (app.py)"].before, 0);  // appeared
  assert.equal(main.children[0].name, "total (app.py)");  // Left Heavy by the new profile: total is 60% now
  assert.match(diffColour(by["parse (app.py)"]), /^rgba\(40, 110, 220/);  // shrank: blue
  assert.match(diffColour(by["total (app.py)"]), /^rgba\(220, 60, 40/);  // grew: red
  assert.match(diffColour({ before: 0.5, after: 0.5 }), /^rgba\(128, 128, 128/);
  const html = diffFlameGraphHtml(root, { cspSource: "vscode-resource:", nonce: "abc", title: "a → b" });
  assert.match(html, /script-src 'nonce-abc'/);
  assert.ok(html.includes('"name":"parse (app.py)"') && !html.includes("<script>alert"));
});


test("restarts run one at a time, in the order asked, and a failed one does not stop the next", async () => {
  const events = [];
  const finish = [];
  let n = 0;
  const run = oneAtATime(() => {
    const i = n++;
    events.push(`start ${i}`);
    return new Promise((resolve, reject) => finish.push(() => {
      events.push(`end ${i}`);
      if (i === 0) reject(new Error("boom")); else resolve();
    }));
  }, (err) => events.push(`reported ${err.message}`));
  const first = run();
  const second = run();
  await new Promise(setImmediate);
  assert.deepEqual(events, ["start 0"]);  // the second waits for the first to end
  finish[0]();
  await assert.rejects(first, /boom/);
  await new Promise(setImmediate);
  assert.deepEqual(events, ["start 0", "end 0", "reported boom", "start 1"]);
  finish[1]();
  await second;
  assert.deepEqual(events.slice(-1), ["end 1"]);
});
