#!/usr/bin/env python3
"""Reads a cache with h5py alone, as a user's own tooling would.

    check_objects.py CACHE_DIR ENTRY [DUMP]

With HDF5_PLUGIN_PATH at npucache's zstd plugin, opens every
objects/<graph_key>.h5, reads /compiled_module through the plugin, and
checks its xxh3-64 against the `checksum` attribute (16 lowercase hex
digits) and its length against `raw_size`. Then reads ENTRY
("<model_info>/<func>") from the model's index <model_info>.h5 through its
external link and checks it is the bytes of the object its `graph_key`
names; DUMP (optional) is h5dump's binary output of the same dataset and
must be those bytes too. Exits 1 naming the first difference.
"""
import os
import sys

import h5py
import xxhash


def text(value):
    return value.decode() if isinstance(value, bytes) else str(value)


def fail(message):
    print(f"check_objects: {message}", file=sys.stderr)
    sys.exit(1)


def main():
    if len(sys.argv) not in (3, 4):
        fail("usage: check_objects.py CACHE_DIR ENTRY [DUMP]")
    cache_dir, entry = sys.argv[1], sys.argv[2]
    objects_dir = os.path.join(cache_dir, "objects")
    names = sorted(n for n in os.listdir(objects_dir) if n.endswith(".h5"))
    if not names:
        fail(f"no objects in {objects_dir}")
    stored = {}
    for name in names:
        path = os.path.join(objects_dir, name)
        with h5py.File(path, "r") as f:
            if f.userblock_size < 512:
                fail(f"{path}: no userblock (npucache's checksummed header)")
            data = f["/compiled_module"][()].tobytes()
            checksum = text(f.attrs["checksum"])
            raw_size = int(f.attrs["raw_size"])
            key = text(f.attrs["graph_key"])
        digest = xxhash.xxh3_64_hexdigest(data)
        if digest != checksum:
            fail(f"{path}: xxh3-64 of /compiled_module is {digest}, the checksum attribute says {checksum}")
        if len(data) != raw_size:
            fail(f"{path}: /compiled_module holds {len(data)} bytes, raw_size says {raw_size}")
        if name != key + ".h5":
            fail(f"{path}: graph_key attribute {key} does not name the file")
        stored[key] = data
        print(f"{name}: {len(data)} bytes, xxh3-64 {digest} = checksum, raw_size {raw_size}")

    model_info = entry.split("/")[0]
    index = os.path.join(cache_dir, model_info + ".h5")
    with h5py.File(index, "r") as f:
        link = f[entry].get("compiled_module", getlink=True)
        if not isinstance(link, h5py.ExternalLink):
            fail(f"{index}:/{entry}/compiled_module is not an external link")
        key = text(f[entry].attrs["graph_key"])
        through_link = f[entry + "/compiled_module"][()].tobytes()
    if key not in stored:
        fail(f"{index}:/{entry} names object {key}, which is not in {objects_dir}")
    if through_link != stored[key]:
        fail(f"{index}:/{entry}/compiled_module (-> {link.filename}) differs from {key}.h5:/compiled_module")
    print(f"{entry}/compiled_module -> {link.filename}:{link.path}: the object's bytes")
    if len(sys.argv) == 4:
        with open(sys.argv[3], "rb") as dump:
            if dump.read() != stored[key]:
                fail(f"h5dump's output {sys.argv[3]} differs from {key}.h5:/compiled_module")
        print(f"h5dump's bytes of {entry}/compiled_module are the object's bytes")
    print(f"checked {len(stored)} object(s)")


if __name__ == "__main__":
    main()
