// npm's "prepare": compiles src/ to dist/ (JS and .d.ts) with the TypeScript of
// package-lock.json. `npm install ./clients/typescript` from a fresh checkout
// runs it in this directory, where the development dependencies are not
// installed yet: it installs them first (npm ci, without scripts).
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const dir = join(dirname(fileURLToPath(import.meta.url)), "..");
const tsc = join(dir, "node_modules", "typescript", "bin", "tsc");
if (!existsSync(tsc)) {
  const npm = process.env.npm_execpath;
  const [cmd, args] = npm && npm.endsWith(".js") ? [process.execPath, [npm]] : ["npm", []];
  execFileSync(cmd, [...args, "ci", "--ignore-scripts", "--no-audit", "--no-fund"], { cwd: dir, stdio: "inherit" });
}
execFileSync(process.execPath, [tsc, "-p", "."], { cwd: dir, stdio: "inherit" });
