// `strata serve` for the npm-oracle tests (tests/server/*_npm.mjs): started on a free port, resolved
// once it listens; stop() ends it with SIGTERM and waits for the exit.
import { spawn } from "node:child_process";

export function startServer(strata, args) {
  return new Promise((resolve, reject) => {
    const proc = spawn(strata, ["serve", ...args, "--port", "0"], { stdio: ["ignore", "ignore", "pipe"] });
    let log = "";
    const timer = setTimeout(() => { proc.kill("SIGKILL"); reject(new Error("strata serve did not start in 60 s:\n" + log)); }, 60000);
    proc.stderr.on("data", (d) => {
      log += d;
      const m = log.match(/listening on http:\/\/127\.0\.0\.1:(\d+)\D/);
      if (m) { clearTimeout(timer); resolve({ proc, port: Number(m[1]), log: () => log }); }
    });
    proc.on("exit", (code) => { clearTimeout(timer); reject(new Error(`strata serve exited (${code}):\n${log}`)); });
  });
}

export const stopServer = (s) => new Promise((r) => { s.proc.once("exit", r); s.proc.kill("SIGTERM"); });
