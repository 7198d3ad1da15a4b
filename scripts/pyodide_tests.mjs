// Run the test suite on CPython 3.14 built for WebAssembly (Pyodide), under node.
//
//   node scripts/pyodide_tests.mjs PYODIDE_DIR WHEELS_DIR [PYTEST_ARG ...]
//
// PYODIDE_DIR: the folder of the `pyodide` npm package (its pyodide.mjs); WHEELS_DIR: pure-Python
// wheels (pytest, hypothesis, attrs, jsonschema, ...) to unpack into the interpreter's
// site-packages. The checkout is mounted at /repo (node's file system, read and write) and the
// package is imported from /repo/src. Exits with pytest's status. CI's py314 job (.ci/run)
// downloads both and runs this.
//
// The interpreter runs in a worker thread with a stack of STACK_MB: WebAssembly's frames live
// on the JavaScript engine's stack, whose default (under 1 MB) C code that recurses exhausts
// before CPython's own depth checks stop it -- the json module's parser on a text of 100,000
// levels, freeing dicts nested 30,000 deep -- and node then ends the whole run with "Maximum
// call stack size exceeded". With this stack, CPython's checks are what stop it (a million
// levels of json are a RecursionError), as on a native build. (node --stack-size cannot give
// that much: the main thread's stack is the system's, 8 MB.)
import { readdirSync, writeSync } from "node:fs";
import { resolve, dirname } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { Worker, isMainThread, workerData } from "node:worker_threads";

const STACK_MB = 256;

if (isMainThread) {
  const args = process.argv.slice(2);
  if (args.length < 2) {
    console.error("usage: node scripts/pyodide_tests.mjs PYODIDE_DIR WHEELS_DIR [PYTEST_ARG ...]");
    process.exit(2);
  }
  const worker = new Worker(fileURLToPath(import.meta.url), {
    workerData: args,
    resourceLimits: { stackSizeMb: STACK_MB },
  });
  worker.on("error", (error) => {
    console.error(error);
    process.exitCode = 1;
  });
  worker.on("exit", (code) => {
    process.exitCode ||= code;
  });
} else {
  const [pyodideDir, wheelsDir, ...pytestArgs] = workerData;
  const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");
  const { loadPyodide } = await import(pathToFileURL(resolve(pyodideDir, "pyodide.mjs")).href);
  const pyodide = await loadPyodide({ env: { ...process.env, HOME: "/home/pyodide" } });
  // A worker's process.stdin/stdout/stderr have no file descriptor, which Pyodide's default
  // streams need (pytest's capture closes and reopens them): no input, and the output bytes
  // go to the process's own descriptors, unbuffered.
  pyodide.setStdin({ error: true });
  pyodide.setStdout({ write: (bytes) => writeSync(1, bytes) });
  pyodide.setStderr({ write: (bytes) => writeSync(2, bytes) });

  for (const [path, root] of [
    ["/repo", repo],
    ["/wheels", resolve(wheelsDir)],
  ]) {
    pyodide.FS.mkdirTree(path);
    pyodide.FS.mount(pyodide.FS.filesystems.NODEFS, { root }, path);
  }
  const wheels = readdirSync(wheelsDir).filter((name) => name.endsWith(".whl"));
  pyodide.globals.set("wheels", pyodide.toPy(wheels));
  pyodide.globals.set("pytest_args", pyodide.toPy(pytestArgs));
  const status = await pyodide.runPythonAsync(`
import os, site, sys, zipfile
target = site.getsitepackages()[0]
for name in wheels:
    with zipfile.ZipFile(f"/wheels/{name}") as wheel:
        wheel.extractall(target)
os.chdir("/repo")
sys.path.insert(0, "/repo/src")
print(f"Python {sys.version} on {sys.platform}; {len(wheels)} wheels unpacked", flush=True)
import pytest
int(pytest.main(list(pytest_args)))
`);
  process.exit(status);
}
