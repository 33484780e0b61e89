// Bundles the extension (and, with --tests, the pure logic for node --test); copies speedscope's offline bundle.
import { build } from "esbuild";
import { cpSync, existsSync, mkdirSync, readdirSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const tests = process.argv.includes("--tests");

if (tests) {
  await build({ entryPoints: [join(root, "src/logic.ts")], outfile: join(root, "out-test/logic.js"), bundle: true,
                platform: "node", format: "esm", target: "node18" });
  cpSync(join(root, "test"), join(root, "out-test"), { recursive: true });
} else {
  await build({ entryPoints: [join(root, "src/extension.ts")], outfile: join(root, "out/extension.js"), bundle: true,
                platform: "node", format: "cjs", target: "node18", external: ["vscode"], sourcemap: true });
  const release = join(root, "node_modules/speedscope/dist/release");
  const media = join(root, "media/speedscope");
  if (!existsSync(release)) throw new Error("speedscope's release bundle is missing: npm ci");
  mkdirSync(media, { recursive: true });
  for (const f of readdirSync(release)) {
    if (/\.(js|css|png|svg|woff2?|json)$/.test(f) && !f.endsWith(".map")) cpSync(join(release, f), join(media, f));
  }
  const js = readdirSync(media).find((f) => /^speedscope.*\.js$/.test(f) && f !== "speedscope.js");
  const css = readdirSync(media).find((f) => /^speedscope.*\.css$/.test(f) && f !== "speedscope.css");
  if (js) cpSync(join(media, js), join(media, "speedscope.js"));
  if (css) cpSync(join(media, css), join(media, "speedscope.css"));
}
