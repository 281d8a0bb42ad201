#!/usr/bin/env python3
"""Writes the large inputs docs/reliability.md measures k3perf on (never committed: hundreds of MB).

  make_large_inputs.py safetensors N OUT.safetensors   N one-element BF16 tensors in one header
  make_large_inputs.py mooncake N SOURCE.jsonl OUT.jsonl
      N requests: SOURCE (a Mooncake trace) repeated, each copy after the last in time, with its
      block hashes shifted past the previous copy's (so prefixes are shared within a copy, as in SOURCE)
"""
import json
import struct
import sys


def safetensors(count, out_path):
    # Names of 17+ characters, as real ones are longer than a short-string buffer.
    entries = []
    for i in range(count):
        name = f"blk.{i // 1000}.exp.{i % 1000}.w"
        entries.append(f'"{name}":{{"dtype":"BF16","shape":[1],"data_offsets":[{2 * i},{2 * i + 2}]}}')
    header = ("{" + ",".join(entries) + "}").encode()
    header += b" " * (-len(header) % 8)
    with open(out_path, "wb") as f:
        f.write(struct.pack("<Q", len(header)))
        f.write(header)
        f.write(b"\x80\x3f" * count)  # bf16 1.0


def mooncake(count, source_path, out_path):
    with open(source_path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    span_ms = rows[-1]["timestamp"] + 1
    hash_span = 1 + max((h for r in rows for h in r["hash_ids"]), default=0)
    written = 0
    with open(out_path, "w") as out:
        copy = 0
        while written < count:
            lines = []
            for r in rows[: count - written]:
                lines.append(
                    '{"timestamp": %d, "input_length": %d, "output_length": %d, "hash_ids": [%s]}\n'
                    % (
                        r["timestamp"] + copy * span_ms,
                        r["input_length"],
                        r["output_length"],
                        ", ".join(str(h + copy * hash_span) for h in r["hash_ids"]),
                    )
                )
            out.writelines(lines)
            written += len(lines)
            copy += 1


def main(argv):
    if len(argv) == 4 and argv[1] == "safetensors":
        safetensors(int(argv[2]), argv[3])
    elif len(argv) == 5 and argv[1] == "mooncake":
        mooncake(int(argv[2]), argv[3], argv[4])
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
