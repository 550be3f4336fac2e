#!/usr/bin/env python3
"""Checks the layering of src/ against src/LAYERS.

Lists, for each folder of src/, the other folders and public header groups
it includes, and fails (exit 1) on any include that src/LAYERS does not
allow:
  - "<layer>/x.h" of another layer that the including layer may not use;
  - "<layer>/sub/x.h" or "<layer>/x_impl.h" of another layer (private);
  - <npucache/...> public headers owned by a layer it may not use;
  - <mpi.h> outside src/mpi, <hdf5.h>/<H5*.h> outside src/h5 (the HDF5
    wrapper and the zstd filter), <zstd.h> outside src/zstd,
    <hiredis/...> or <sodium.h> outside src/remote.
Public headers in include/npucache are checked too, as part of the layer
that owns them.

  scripts/check_layers.py [ROOT]     (ROOT defaults to the repository)
"""
import os
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.M)
BASE = {"log", "process"}           # every layer may use these folders
BASE_PUBLIC = {"error.h", "export.h", "version.h", "version_config.h", "process.h"}


def read_layers(root):
    uses = {}
    with open(os.path.join(root, "src", "LAYERS")) as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            name, _, deps = line.partition(":")
            uses[name.strip()] = set(deps.split())
    return uses


def public_owner(path):
    """The layer owning a public header (path relative to include/npucache)."""
    top = path.split("/", 1)[0]
    if "/" in path:
        return {"ir": "ir", "runtime": "runtime", "nn": "nn", "compiler": "compiler", "models": "models"}.get(top)
    return {
        "device.h": "runtime", "tensor.h": "nn", "module.h": "nn", "ops.h": "nn", "trace.h": "nn", "region.h": "nn",
        "compile.h": "compiler", "cache.h": "cache", "mpi.h": "mpi", "coordinator.h": "coord",
        "npucache.h": "coord",
    }.get(path, "base" if path in BASE_PUBLIC else None)


def files(root):
    """(layer, path) of every source and header to check."""
    for layer_dir in sorted(os.listdir(os.path.join(root, "src"))):
        full = os.path.join(root, "src", layer_dir)
        if not os.path.isdir(full):
            continue
        for d, _, names in os.walk(full):
            for n in sorted(names):
                if n.endswith((".h", ".cpp")):
                    yield layer_dir, os.path.join(d, n)
    inc = os.path.join(root, "include", "npucache")
    for d, _, names in os.walk(inc):
        for n in sorted(names):
            rel = os.path.relpath(os.path.join(d, n), inc)
            owner = public_owner(rel)
            yield owner or "unknown", os.path.join(d, n)


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    uses = read_layers(root)
    errors, summary = [], {}
    for layer, path in files(root):
        rel = os.path.relpath(path, root)
        if layer not in uses and layer != "base":
            errors.append(f"{rel}: folder '{layer}' is not a layer of src/LAYERS")
            continue
        allowed = uses.get(layer, set()) | BASE | {layer}
        text = open(path, errors="replace").read()
        for kind, target in INCLUDE.findall(text):
            if kind == "<":
                if target == "mpi.h" and layer != "mpi":
                    errors.append(f"{rel}: includes <mpi.h>; only src/mpi may")
                if (target == "hdf5.h" or target.startswith("H5")) and layer != "h5":
                    errors.append(f"{rel}: includes <{target}>; only src/h5 may")
                if target in ("zstd.h", "zstd_errors.h") and layer != "zstd":
                    errors.append(f"{rel}: includes <{target}>; only src/zstd may")
                if (target.startswith("hiredis/") or target == "sodium.h") and layer != "remote":
                    errors.append(f"{rel}: includes <{target}>; only src/remote may")
                if target.startswith("npucache/"):
                    owner = public_owner(target[len("npucache/"):])
                    summary.setdefault(layer, set()).add(f"<npucache/{owner}>")
                    if owner is None:
                        errors.append(f"{rel}: includes <{target}>, which is no public header")
                    elif owner != "base" and owner not in allowed:
                        errors.append(f"{rel}: includes <{target}> of layer '{owner}', which '{layer}' may not use")
                continue
            folder, _, rest = target.partition("/")
            if not rest:
                continue  # a file of the including folder itself
            if folder != layer:
                summary.setdefault(layer, set()).add(folder)
            if folder not in allowed:
                errors.append(f'{rel}: includes "{target}" of layer \'{folder}\', which \'{layer}\' may not use')
            elif folder != layer and ("/" in rest or rest.endswith("_impl.h")):
                errors.append(f'{rel}: includes "{target}", a private header of layer \'{folder}\'')
    for layer in sorted(summary):
        print(f"{layer:9} -> {', '.join(sorted(summary[layer]))}")
    for e in errors:
        print("layering violation: " + e, file=sys.stderr)
    if errors:
        print(f"{len(errors)} include(s) against src/LAYERS", file=sys.stderr)
        return 1
    print("layering: every include follows src/LAYERS")
    return 0


if __name__ == "__main__":
    sys.exit(main())
