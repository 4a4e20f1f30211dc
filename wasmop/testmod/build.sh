#!/bin/sh
# Rebuilds the test modules from their WebAssembly text sources with wabt's
# wat2wasm (npm package wabt 1.0.37; the output is deterministic and has no
# name section). The .wasm files are checked in; run this after editing a
# .wat file:
#   sh wasmop/testmod/build.sh
set -eu
cd "$(dirname "$0")"
for f in *.wat; do
	npx --yes -p wabt@1.0.37 wat2wasm "$f" -o "${f%.wat}.wasm"
done
