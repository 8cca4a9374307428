#!/usr/bin/env bash
# Runs dtplan on good and bad input and checks exit codes and messages.
# Usage: dtplan_cli_test.sh <dtplan> <source dir>
set -u
DTPLAN=$1
SRC=$2
M=$SRC/examples/models
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0

# expect <code> <regex of stderr+stdout> -- command...
expect() {
  local code=$1 pattern=$2
  shift 3
  local out
  out=$("$@" 2>&1)
  local rc=$?
  if [ "$rc" -ne "$code" ]; then
    echo "FAIL: exit $rc (want $code): $*"; echo "$out" | tail -5; fails=$((fails + 1)); return
  fi
  if ! echo "$out" | grep -Eq -- "$pattern"; then
    echo "FAIL: output lacks /$pattern/: $*"; echo "$out" | tail -5; fails=$((fails + 1)); return
  fi
  if [ "$code" -eq 2 ] && [ "$(echo "$out" | grep -c 'error')" -ne 1 ]; then
    echo "FAIL: want exactly one error line: $*"; echo "$out"; fails=$((fails + 1)); return
  fi
  echo "ok: $*"
}

# The main job and its files.
expect 0 "rank +dp +tp +pp" -- "$DTPLAN" --model "$M/gpt3-175b.json" --nodes 8 --gpus 8 --out "$T/plan.json" --trace "$T/trace.json"
python3 -c "import json,sys; p=json.load(open('$T/plan.json')); assert p['plan']['dp']*p['plan']['tp']*p['plan']['pp']==64" || { echo "FAIL: plan.json"; fails=$((fails+1)); }
python3 -c "import json; t=json.load(open('$T/trace.json')); assert any(e.get('ph')=='X' for e in t['traceEvents'])" || { echo "FAIL: trace.json"; fails=$((fails+1)); }
expect 0 '"step_time_s"' -- "$DTPLAN" simulate --plan "$T/plan.json"
expect 0 '"top"' -- "$DTPLAN" --model "$M/llama3-8b.json" --nodes 1 --gpus 8 --json --out "$T/p2.json"
expect 0 "rank" -- "$DTPLAN" --model "$M/gpt3-175b.json" --nodes 8 --gpus 8 --tp 8 --pp 8 --mbs 1 --schedule 1f1b --recompute full --zero 1 --no-sp --out "$T/p3.json"

# Bad input: one line naming the field and the fix, exit 2.
# HuggingFace configs: MoE refused (not shrunk to a dense model), unknown type lists the supported ones,
# a window shorter than the sequence is refused, GPT-2's own names load.
H=$SRC/tests/planner/hf_configs
expect 2 "mixture-of-experts.*supported model_types: llama" -- "$DTPLAN" --model "$H/mixtral-8x7b.json" --out "$T/x.json"
expect 2 "mixture-of-experts" -- "$DTPLAN" --model "$H/deepseek-v3.json" --out "$T/x.json"
expect 2 "model_type 'mamba' is not supported; supported model_types: llama, mistral" -- "$DTPLAN" --model <(sed 's/"mistral"/"mamba"/' "$H/mistral-7b.json") --out "$T/x.json"
expect 2 "sliding_window 4096" -- "$DTPLAN" --model "$H/mistral-7b.json" --seq-length 8192 --out "$T/x.json"
expect 0 "gpt2 \\(HF gpt2: gpt layout, 0.12B params" -- "$DTPLAN" --model "$H/gpt2.json" --nodes 1 --gpus 2 --out "$T/ok.json"
expect 2 "CPU runtime does not execute a layout beyond GPT-2" -- "$DTPLAN" --model "$H/opt-125m.json" --nodes 1 --gpus 2 --device cpu --out "$T/x.json"
expect 2 "missing field 'hidden_size'" -- "$DTPLAN" --model <(echo '{"family":"gpt","num_layers":2,"num_attention_heads":2,"vocab_size":10,"seq_length":8}') --out "$T/x.json"
expect 2 "'num_layers' must be an integer" -- "$DTPLAN" --model <(echo '{"family":"gpt","num_layers":"two","hidden_size":8,"num_attention_heads":2,"vocab_size":10,"seq_length":8}') --out "$T/x.json"
expect 2 "not valid JSON" -- "$DTPLAN" --model <(echo '{"family": ') --out "$T/x.json"
expect 2 "cannot open" -- "$DTPLAN" --model "$T/nope.json"
expect 2 "unknown.*(A100|bundled)" -- "$DTPLAN" --model "$M/gpt3-175b.json" --profile B200-imaginary
expect 2 "--tp 7 does not divide the 96 attention heads" -- "$DTPLAN" --model "$M/gpt3-175b.json" --nodes 8 --gpus 8 --tp 7
expect 2 "--pp 128 exceeds the model's 96 layers" -- "$DTPLAN" --model "$M/gpt3-175b.json" --nodes 16 --gpus 8 --pp 128
expect 2 "no plan fits in memory.*closest.*over" -- "$DTPLAN" --model "$M/gpt3-175b.json" --nodes 1 --gpus 2 --out "$T/x.json"
expect 2 "schedule 'zigzag' is unknown" -- "$DTPLAN" --model "$M/gpt3-175b.json" --schedule zigzag
expect 2 "error" -- "$DTPLAN" --model "$M/gpt3-175b.json" --nodes 0
expect 2 "--gpus 4 exceeds the 2 devices per node" -- "$DTPLAN" --model "$M/gpt-tiny.json" --nodes 1 --gpus 4 --device cpu --out "$T/x.json"
expect 2 "--cases" -- "$DTPLAN" validate --cases "$T/none.csv"
[ ! -e "$T/x.json" ] || { echo "FAIL: a failed run wrote its --out file"; fails=$((fails+1)); }

if [ "$fails" -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "all dtplan CLI checks passed"
