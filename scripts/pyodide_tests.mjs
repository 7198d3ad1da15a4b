// Run the test suite on CPython 3.14 built for WebAssembly (Pyodide), under node.
//
//   node scripts/pyodide_tests.mjs PYODIDE_DIR WHEELS_DIR [PYTEST_ARG ...]
//
// PYODIDE_DIR: the folder of the `pyodide` npm package (its pyodide.mjs); WHEELS_DIR: pure-Python
// wheels (pytest, hypothesis, attrs, jsonschema, ...) to unpack into the interpreter's
// site-packages. The checkout is mounted at /repo (node's file system, read and write) and the
// package is imported from /repo/src. Exits with pytest's status. CI's py314 job (.ci/run)
// downloads both and runs this.
import { readdirSync } from "node:fs";
import { resolve, dirname } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const [pyodideDir, wheelsDir, ...pytestArgs] = process.argv.slice(2);
if (!pyodideDir || !wheelsDir) {
  console.error("usage: node scripts/pyodide_tests.mjs PYODIDE_DIR WHEELS_DIR [PYTEST_ARG ...]");
  process.exit(2);
}
const repo = resolve(dirname(fileURLToPath(import.meta.url)), "..");
const { loadPyodide } = await import(pathToFileURL(resolve(pyodideDir, "pyodide.mjs")).href);
const pyodide = await loadPyodide({ env: { ...process.env, HOME: "/home/pyodide" } });

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
