#!/usr/bin/env bash
# Type-checks index.d.ts, and every ```js snippet of README.md as a checked JavaScript module
# against it (`// @ts-check`, strict), with TypeScript's `tsc` (Debian: node-typescript). Prints
# "typecheck: N passed, M failed" last (the snippets and the declarations, each one check);
# without tsc it says so and exits 0.
set -u
here=$(cd "$(dirname "$0")" && pwd)
node_dir=$(cd "$here/.." && pwd)
if ! command -v tsc >/dev/null 2>&1; then
    echo "typecheck: tsc not found (apt-get install node-typescript); skipped"
    echo "typecheck: 0 passed, 0 failed"
    exit 0
fi
work=$(mktemp -d "${TMPDIR:-/tmp}/sbtypecheck-XXXXXX")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/snippets"
python3 - "$node_dir/README.md" "$work/snippets" <<'PY'
import re, sys
text = open(sys.argv[1], encoding="utf-8").read()
for i, code in enumerate(re.findall(r"^```js\n(.*?)^```$", text, re.M | re.S)):
    with open(f"{sys.argv[2]}/snippet-{i + 1}.js", "w", encoding="utf-8") as f:
        f.write("// @ts-check\n" + code)
PY
cat > "$work/tsconfig.json" <<JSON
{"compilerOptions": {"strict": true, "useUnknownInCatchVariables": false, "noEmit": true, "allowJs": true,
  "checkJs": true, "target": "es2022", "module": "es2022", "moduleResolution": "node", "baseUrl": ".",
  "typeRoots": ["$here/types"], "types": ["node"], "paths": {"sharebroker": ["$node_dir/index.d.ts"]}},
 "files": ["$node_dir/index.d.ts"], "include": ["snippets/*.js"]}
JSON
passed=0 failed=0
n=$(ls "$work/snippets" | wc -l)
if out=$(cd "$work" && tsc -p . 2>&1); then
    passed=$((n + 1))
    echo "typecheck: index.d.ts and $n README snippets type-check"
else
    printf '%s\n' "$out" | sed "s#$work/##"
    bad=$(printf '%s\n' "$out" | grep -oE "^(snippets/snippet-[0-9]+\.js|$node_dir/index\.d\.ts|\.\./[^(]*Clients/node/index\.d\.ts)" | sort -u | wc -l)
    if [ "$bad" -eq 0 ]; then
        # (tsc failed for something else, its configuration or an old tsc: nothing was checked)
        failed=1 passed=0
    else
        failed=$bad
        passed=$((n + 1 - bad))
    fi
fi
echo "typecheck: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
