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
# A plan file's unknown field (a typo) is refused by name, at every level; dtplan's own files load.
python3 - "$T/plan.json" "$T" <<'PY'
import json, sys
src, out = sys.argv[1], sys.argv[2]
for name, where, key in (("typo-plan", "plan", "tpp"), ("typo-model", "model", "num_kv_head"),
                         ("typo-cluster", "cluster", "gpu_per_node"), ("typo-top", None, "clustr")):
    d = json.load(open(src))
    (d if where is None else d[where])[key] = 2
    json.dump(d, open("%s/%s.json" % (out, name), "w"))
PY
expect 2 "field 'plan': unknown field 'tpp'" -- "$DTPLAN" simulate --plan "$T/typo-plan.json"
expect 2 "field 'model': unknown field 'num_kv_head'" -- "$DTPLAN" simulate --plan "$T/typo-model.json"
expect 2 "field 'cluster': unknown field 'gpu_per_node'" -- "$DTPLAN" export --plan "$T/typo-cluster.json" --to megatron
expect 2 "unknown field 'clustr'" -- "$DTPLAN" simulate --plan "$T/typo-top.json"
expect 2 "model file .*unknown field 'kv_heads'" -- "$DTPLAN" --model <(sed 's/"num_layers"/"kv_heads": 2, "num_layers"/' "$M/gpt-tiny.json") --device cpu --nodes 1 --gpus 2 --out "$T/x.json"
# --nodes / --gpus replace the plan file's cluster (a what-if), never ignored: the same 64 ranks
# on 32 nodes of 2 price the plan's TP 4 across nodes; a cluster of the wrong size is refused.
expect 2 "the plan needs 64 devices.*--nodes / --gpus replace" -- "$DTPLAN" simulate --plan "$T/plan.json" --nodes 3
step8=$("$DTPLAN" simulate --plan "$T/plan.json" | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['cluster']['gpus_per_node'], d['prediction']['step_time_s'])")
step4=$("$DTPLAN" simulate --plan "$T/plan.json" --nodes 32 --gpus 2 | python3 -c "import json,sys; d=json.load(sys.stdin); print(d['cluster']['gpus_per_node'], d['prediction']['step_time_s'])")
if [ "${step8%% *}" = 8 ] && [ "${step4%% *}" = 2 ] && [ "${step4#* }" != "${step8#* }" ]; then
  echo "ok: simulate --nodes 32 --gpus 2 re-prices the plan on that cluster ($step8 -> $step4)"
else
  echo "FAIL: simulate --nodes/--gpus: '$step8' -> '$step4'"; fails=$((fails + 1))
fi
expect 0 '"top"' -- "$DTPLAN" --model "$M/llama3-8b.json" --nodes 1 --gpus 8 --json --out "$T/p2.json"
expect 0 "rank" -- "$DTPLAN" --model "$M/gpt3-175b.json" --nodes 8 --gpus 8 --tp 8 --pp 8 --mbs 1 --schedule 1f1b --recompute full --zero 1 --no-sp --out "$T/p3.json"

# Bad input: one line naming the field and the fix, exit 2.
# HuggingFace configs: MLA keys on another type refused, Qwen1.5-MoE refused for CPU ranks (its QKV biases), --ep needs
# experts, unknown type lists the supported ones,
# context parallelism with a window shorter than the sequence is refused, GPT-OSS's published config is refused for
# its quantized weights, GPT-2's own names load.
H=$SRC/tests/planner/hf_configs
expect 2 "does not execute a layout beyond GPT-2 / Llama" -- "$DTPLAN" --model "$H/qwen1.5-moe-a2.7b.json" --nodes 1 --gpus 2 --device cpu --out "$T/x.json"
# --recompute-modules (Megatron-LM's names): needs --recompute selective,
# modules the model has, and dtrun (CPU plans) refuses other than the default.
expect 2 "add --recompute selective" -- "$DTPLAN" --model "$M/llama3-8b.json" --nodes 1 --gpus 8 --recompute-modules mlp --out "$T/x.json"
expect 2 "'moe_act' but the model has no experts" -- "$DTPLAN" --model "$M/llama3-8b.json" --nodes 1 --gpus 8 --recompute selective --recompute-modules moe_act --out "$T/x.json"
expect 2 "'attn' is unknown" -- "$DTPLAN" --model "$M/llama3-8b.json" --nodes 1 --gpus 8 --recompute selective --recompute-modules attn --out "$T/x.json"
expect 0 "rc=selective\\(core_attn,mlp\\)" -- "$DTPLAN" --model "$M/llama3-8b.json" --nodes 1 --gpus 8 --recompute selective --recompute-modules core_attn,mlp --top 1 --out "$T/rm.json"
expect 0 "--recompute-modules core_attn mlp" -- "$DTPLAN" export --plan "$T/rm.json" --to megatron
expect 2 "selective recompute of chosen modules" -- "$DTPLAN" --model "$M/mixtral-tiny.json" --nodes 1 --gpus 2 --device cpu --recompute selective --recompute-modules moe_act --out "$T/x.json"
expect 0 "deepseek-v3 \\(HF deepseek_v3: .*671.03B params" -- "$DTPLAN" --model "$H/deepseek-v3.json" --nodes 128 --gpus 8 --top 1 --out "$T/ds.json"
expect 2 "key 'index_topk'" -- "$DTPLAN" --model <(sed 's/"kv_lora_rank"/"index_topk": 2048, "kv_lora_rank"/' "$H/deepseek-v3.json") --out "$T/x.json"
expect 2 "precision fp8: profile 'A100-SXM4-80GB' has no FP8 GEMM data" -- "$DTPLAN" --model "$M/llama3-8b.json" --nodes 1 --gpus 8 --profile a100 --precision fp8 --out "$T/x.json"
expect 0 "fp8" -- "$DTPLAN" --model "$H/deepseek-v3.json" --nodes 128 --gpus 8 --profile h100 --precision fp8 --top 1 --out "$T/ds-fp8.json"
expect 0 "fp8" -- "$DTPLAN" --model "$H/mixtral-8x7b.json" --nodes 4 --gpus 8 --profile h100 --precision fp8 --top 1 --out "$T/moe-fp8.json"
expect 2 "precision 'fp4' is unknown" -- "$DTPLAN" --model "$M/llama3-8b.json" --nodes 1 --gpus 8 --precision fp4 --out "$T/x.json"
expect 0 "fp8" -- "$DTPLAN" --model "$M/llama3-8b.json" --nodes 1 --gpus 8 --profile h100 --precision fp8 --out "$T/fp8.json"
python3 -c "import json; p=json.load(open('$T/fp8.json')); assert p['plan']['precision']=='fp8'" || { echo "FAIL: fp8 plan.json"; fails=$((fails+1)); }
expect 2 "--ep 2: the model has no experts" -- "$DTPLAN" --model "$H/gpt2.json" --nodes 1 --gpus 2 --ep 2 --out "$T/x.json"
expect 2 "--ep 3 does not divide the model's 8 experts" -- "$DTPLAN" --model "$H/mixtral-8x7b.json" --nodes 1 --gpus 8 --ep 3 --out "$T/x.json"
expect 2 "model_type 'mamba' is not supported; supported model_types: llama, mistral" -- "$DTPLAN" --model <(sed 's/"mistral"/"mamba"/' "$H/mistral-7b.json") --out "$T/x.json"
expect 2 "cp > 1 with sliding-window attention is not modeled" -- "$DTPLAN" --model "$H/mistral-7b.json" --seq-length 8192 --cp 2 --out "$T/x.json"
expect 2 "key 'quantization_config'" -- "$DTPLAN" --model "$H/gpt-oss-120b.json" --nodes 8 --gpus 8 --out "$T/x.json"
expect 0 "HF gpt_oss: llama layout variant, 116.83B params" -- "$DTPLAN" --model <(python3 -c "import json,sys; j=json.load(open('$H/gpt-oss-120b.json')); j.pop('quantization_config'); print(json.dumps(j))") --nodes 8 --gpus 8 --profile h100 --top 1 --out "$T/oss.json"
expect 0 "gpt2 \\(HF gpt2: gpt layout, 0.12B params" -- "$DTPLAN" --model "$H/gpt2.json" --nodes 1 --gpus 2 --out "$T/ok.json"
# The bundled MoE example for CPU ranks: exact counts (tiny models print whole numbers), an ep=2 plan.
expect 0 "mixtral-tiny \\(HF mixtral: llama layout, 205632 params" -- "$DTPLAN" --model "$M/mixtral-tiny.json" --nodes 1 --gpus 2 --device cpu --ep 2 --out "$T/moe.json"
expect 0 "MoE      4 experts, top-2 routed: 205632 total, 131904 active" -- "$DTPLAN" --model "$M/mixtral-tiny.json" --nodes 1 --gpus 2 --device cpu --ep 2 --out "$T/moe.json"
# MoE plans quote how far MoE step times were checked (planner/validate/published_accuracy.h,
# its figures re-scored by PublishedAccuracy.*); dense plans do not.
expect 0 "note: MoE step times are less certain than dense ones: against [0-9]+ published Megatron-LM MoE runs" -- "$DTPLAN" --model "$H/mixtral-8x7b.json" --nodes 2 --gpus 8 --profile h100 --top 1 --out "$T/moe-note.json"
expect 0 '"accuracy_note": "MoE step times are less certain' -- "$DTPLAN" --model "$H/mixtral-8x7b.json" --nodes 2 --gpus 8 --profile h100 --top 1 --json --out "$T/moe-note.json"
if "$DTPLAN" --model "$M/llama3-8b.json" --nodes 1 --gpus 8 --top 1 --out "$T/dense-note.json" 2>&1 | grep -q "MoE step times"; then
  echo "FAIL: a dense plan carries the MoE accuracy note"; fails=$((fails + 1))
else
  echo "ok: a dense plan carries no MoE accuracy note"
fi
# A plan whose device mostly waits for the host's launches says so (Prediction::host_wait_share):
# GPT-2 124M on 8 H100s is launch-bound; Llama 3 8B is not.
expect 0 "note: launch-bound: [0-9]+% of the kernel time on its busiest stage is the device waiting for the host" -- "$DTPLAN" --model "$M/gpt2-124m.json" --nodes 1 --gpus 8 --profile h100 --top 1 --out "$T/launch.json"
python3 -c "import json; p=json.load(open('$T/launch.json')); assert p['prediction']['host_wait_share'] >= 0.05, p['prediction']" || { echo "FAIL: launch.json host_wait_share"; fails=$((fails+1)); }
expect 0 '"launch_note": "launch-bound: ' -- "$DTPLAN" --model "$M/gpt2-124m.json" --nodes 1 --gpus 8 --profile h100 --top 1 --json --out "$T/launch.json"
expect 0 "Wrote|wrote" -- "$DTPLAN" --model "$M/gpt2-124m.json" --nodes 1 --gpus 8 --profile h100 --top 1 --report "$T/launch.html" --out "$T/launch.json"
grep -q "launch-bound: " "$T/launch.html" || { echo "FAIL: the HTML report lacks the launch-bound note"; fails=$((fails+1)); }
if "$DTPLAN" --model "$M/llama3-8b.json" --nodes 1 --gpus 8 --profile h100 --top 1 --out "$T/device-bound.json" 2>&1 | grep -q "launch-bound"; then
  echo "FAIL: a device-bound plan is called launch-bound"; fails=$((fails + 1))
else
  echo "ok: a device-bound plan is not called launch-bound"
fi
# An H100 plan priced at the default attention rate says what cuDNN's would give
# (the step measured again with --attention-kernel cudnn); a plan that asks for
# cuDNN, or an A100 plan (no cuDNN curve), does not.
expect 0 "note: attention kernel: priced at the profile's default attention rate; with cuDNN's fused attention.* this plan's step would be [0-9.]+ s \(-[0-9]+%" -- "$DTPLAN" --model "$M/llama3-8b.json" --nodes 1 --gpus 8 --profile h100 --top 1 --out "$T/attn.json"
expect 0 '"attention_note": "attention kernel: ' -- "$DTPLAN" --model "$M/llama3-8b.json" --nodes 1 --gpus 8 --profile h100 --top 1 --json --out "$T/attn.json"
expect 0 "Wrote|wrote" -- "$DTPLAN" --model "$M/llama3-8b.json" --nodes 1 --gpus 8 --profile h100 --top 1 --report "$T/attn.html" --out "$T/attn.json"
grep -q "attention kernel: " "$T/attn.html" || { echo "FAIL: the HTML report lacks the attention-kernel note"; fails=$((fails+1)); }
for args in "--profile h100 --attention-kernel cudnn" "--profile a100"; do
  # shellcheck disable=SC2086
  if "$DTPLAN" --model "$M/llama3-8b.json" --nodes 1 --gpus 8 $args --top 1 --out "$T/attn.json" 2>&1 | grep -q "attention kernel:"; then
    echo "FAIL: the attention-kernel note with $args"; fails=$((fails + 1))
  else
    echo "ok: no attention-kernel note with $args"
  fi
done
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
# A GPT model trains with dropout on every device, the CPU included (dtrun executes it): the CPU plan
# keeps it and prints no dropout note; a model without dropout has none either.
"$DTPLAN" --model "$M/gpt-tiny.json" --device cpu --nodes 1 --gpus 2 --top 1 --out "$T/d.json" > /dev/null
dp=$(python3 -c "import json; print(json.load(open('$T/d.json'))['plan']['dropout'])")
dn=$("$DTPLAN" --model "$M/gpt-tiny.json" --device cpu --nodes 1 --gpus 2 --top 1 --json | python3 -c "import json,sys; print('dropout_note' in json.load(sys.stdin))")
dl=$("$DTPLAN" --model "$M/llama-tiny.json" --device cpu --nodes 1 --gpus 2 --top 1 --json | python3 -c "import json,sys; print('dropout_note' in json.load(sys.stdin))")
if [ "$dp $dn $dl" = "True False False" ]; then echo "ok: CPU plans of a GPT model keep its dropout, no note"
else echo "FAIL: CPU dropout (plan flag, gpt note, llama note): $dp $dn $dl"; fails=$((fails + 1)); fi
# validate's two modes share one option list; an option of the other mode is refused, not ignored.
D=$SRC/examples/validation/published-dense.json
expect 2 "validate: --tp applies to --execute only" -- "$DTPLAN" validate --cases "$D" --tp 8
expect 2 "validate: --model applies to --execute only" -- "$DTPLAN" validate --cases "$D" --model "$M/gpt-tiny.json"
expect 2 "validate: --cases does not apply with --execute" -- "$DTPLAN" validate --execute --cases "$D" --model "$M/gpt-tiny.json"
expect 2 "--json does not combine with --cv" -- "$DTPLAN" validate --cv --json --cases "$D"
expect 2 "--attention-kernel does not combine with --cv" -- "$DTPLAN" validate --cv --cases "$D" --attention-kernel cudnn
# --attention-kernel with --cases: a what-if over every case with a fused core on a profile with the curve.
out_case=$("$DTPLAN" validate --cases "$D" --json)
out_cudnn=$("$DTPLAN" validate --cases "$D" --json --attention-kernel cudnn)
if python3 -c '
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert a["attention_overridden"] == 0, a["attention_overridden"]
assert b["attention_overridden"] == b["scored"] == a["scored"] > 0, (b["attention_overridden"], b["scored"])
assert all(c["plan"]["attention_kernel"] == "cudnn" for c in b["cases"] if not c["skipped"])
# the faster kernel never makes a step slower
assert all(y["predicted_s"] <= x["predicted_s"] * (1 + 1e-9) for x, y in zip(a["cases"], b["cases"]))
assert any(y["predicted_s"] < x["predicted_s"] for x, y in zip(a["cases"], b["cases"]))
' "$out_case" "$out_cudnn"; then
  echo "ok: validate --attention-kernel cudnn prices every fused core of the cases with cuDNN"
else
  echo "FAIL: validate --attention-kernel cudnn"; fails=$((fails + 1))
fi

# Input holes: each one line naming the user's own field and the fix.
expect 2 "--global-batch -5 must be >= 1" -- "$DTPLAN" --model "$M/gpt3-175b.json" --global-batch -5 --out "$T/x.json"
expect 2 "--global-batch 0 must be >= 1" -- "$DTPLAN" --model "$M/gpt3-175b.json" --global-batch 0 --out "$T/x.json"
expect 2 "--seq-length 0 must be >= 1" -- "$DTPLAN" --model "$M/gpt3-175b.json" --seq-length 0 --out "$T/x.json"
expect 2 "--global-batch -5 must be >= 1" -- "$DTPLAN" validate --execute --model "$M/gpt-tiny.json" --global-batch -5
expect 2 "'num_hidden_layers' = 4294967328 is outside" -- "$DTPLAN" --model <(sed 's/"num_hidden_layers": [0-9]*/"num_hidden_layers": 4294967328/' "$M/llama3-8b.json") --out "$T/x.json"
expect 2 "'num_layers' = 4294967298 is out of range" -- "$DTPLAN" --model <(sed 's/"num_layers": [0-9]*/"num_layers": 4294967298/' "$M/gpt-tiny.json") --device cpu --nodes 1 --gpus 2 --out "$T/x.json"
expect 2 "'$M' is a directory, not a JSON file" -- "$DTPLAN" --model "$M" --out "$T/x.json"
expect 2 "not valid JSON.*expected end of input" -- "$DTPLAN" --model <(cat "$M/gpt-tiny.json"; echo ' {"x": 1}') --out "$T/x.json"
expect 2 "--threads: Value -1 not in range" -- "$DTPLAN" --model "$M/gpt-tiny.json" --threads -1 --out "$T/x.json"
expect 0 "wrote" -- "$DTPLAN" --model "$M/gpt-tiny.json" --device cpu --nodes 1 --gpus 2 --threads 0 --threads 1 --out "$T/t0.json"
expect 0 "profile +measure this machine" -- "$DTPLAN" --help
# CPU profiles hold for their own ranks per node (dtrun gives each rank cores / ranks threads): the
# default for --gpus 1 is the 1-rank profile, and another rank count than a profile's is said.
expect 0 "profile +local-cpu-1rank " -- "$DTPLAN" --model "$M/gpt-tiny.json" --device cpu --nodes 1 --gpus 1 --out "$T/r1.json"
expect 0 "measured with 2 ranks per node but --gpus is 1.*--ranks 1" -- "$DTPLAN" --model "$M/gpt-tiny.json" --device cpu --nodes 1 --gpus 1 --profile local-cpu --out "$T/r1.json"
out=$("$DTPLAN" --model "$M/gpt-tiny.json" --device cpu --nodes 1 --gpus 2 --out "$T/r2.json" 2>&1)
if echo "$out" | grep -q "ranks per node but"; then echo "FAIL: the 2-rank default profile on 2 ranks notes a rank mismatch"; fails=$((fails + 1)); fi
# --speed-check needs a CPU profile measured by `dtplan profile` (it re-runs its whole-step checks).
expect 2 "--speed-check: profile 'cpu-generic' has no whole-step checks" -- "$DTPLAN" validate --execute --model "$M/gpt-tiny.json" --nodes 1 --gpus 2 --device cpu --profile cpu-generic --speed-check --dtrun /bin/false --work-dir "$T/sc"
expect 2 "--speed-check: it re-measures a CPU profile" -- "$DTPLAN" validate --execute --model "$M/gpt-tiny.json" --nodes 1 --gpus 2 --speed-check --dtrun /bin/false --work-dir "$T/sc"
# validate --execute --top N runs exactly N plans (a dtrun that fails at once: only the count matters here).
out=$("$DTPLAN" validate --execute --model "$M/gpt-tiny.json" --nodes 1 --gpus 2 --device cpu --top 3 --steps 2 --dtrun /bin/false --work-dir "$T/ex" 2>&1)
echo "$out" | grep -q "^running 3 of " && [ "$(echo "$out" | grep -c '^\[[0-9]/3[],]')" -eq 3 ] \
  && echo "ok: validate --execute --top 3 runs 3 plans" || { echo "FAIL: validate --execute --top 3"; echo "$out" | head -3; fails=$((fails+1)); }
# --rounds: every plan runs once per round, rounds in turn; its time is the median of its runs.
# A stand-in dtrun writes each run's metrics with a step time that depends on the round
# (10, 30, 20 ms): the median, 20 ms, is what is scored.
cat > "$T/fake_dtrun.sh" <<'FAKE'
#!/usr/bin/env bash
metrics=""; plan=""
while [ $# -gt 0 ]; do case "$1" in --metrics) metrics="$2"; shift;; --plan) plan="$2"; shift;; esac; shift; done
rank="${OMPI_COMM_WORLD_RANK:-0}"
case "$metrics" in *.round2.jsonl) t=0.030;; *.round3.jsonl) t=0.020;; *) t=0.010;; esac
for step in 1 2 3; do echo "{\"step\":$step,\"rank\":$rank,\"step_time_s\":$t,\"peak_bytes\":1000}" >> "$metrics"; done
if [ "$rank" = 0 ]; then basename "$metrics" >> "$(dirname "$metrics")/order.log"; fi
FAKE
chmod +x "$T/fake_dtrun.sh"
out=$("$DTPLAN" validate --execute --model "$M/gpt-tiny.json" --nodes 1 --gpus 2 --device cpu --top 2 --steps 3 --rounds 3 \
        --dtrun "$T/fake_dtrun.sh" --work-dir "$T/rounds" --json 2>"$T/rounds.err")
if echo "$out" | python3 -c 'import json,sys; d=json.load(sys.stdin); ps=d["plans"]; assert len(ps)==2, ps; assert all(p["round_step_s"]==[0.01,0.03,0.02] and abs(p["measured_step_s"]-0.02)<1e-12 for p in ps), ps' \
   && [ "$(grep -c 'round 3/3' "$T/rounds.err")" -eq 2 ]; then
  echo "ok: validate --execute --rounds 3 scores the median of the rounds"
else
  echo "FAIL: validate --execute --rounds"; echo "$out" | head -5; head -5 "$T/rounds.err"; fails=$((fails+1))
fi
# Odd rounds run the plans in reverse order: no plan is always first or last in its round.
order=$(tr '\n' ' ' < "$T/rounds/order.log")
if [ "$order" = "plan0.jsonl plan1.jsonl plan1.round2.jsonl plan0.round2.jsonl plan0.round3.jsonl plan1.round3.jsonl " ]; then
  echo "ok: validate --execute alternates the plans' order between rounds"
else
  echo "FAIL: validate --execute round order: $order"; fails=$((fails+1))
fi

# Per-stage memory: each plan names its worst stage (the largest |predicted - measured| / measured),
# and the summary's max error is the largest of those. A stand-in dtrun reports 1 MiB on rank 0
# and 9 MiB on rank 1, so on pp 2 plans the two stages miss by different amounts.
cat > "$T/fake_dtrun_stages.sh" <<'FAKE'
#!/usr/bin/env bash
metrics=""
while [ $# -gt 0 ]; do case "$1" in --metrics) metrics="$2"; shift;; esac; shift; done
rank="${OMPI_COMM_WORLD_RANK:-0}"
peak=$(( rank == 0 ? 1048576 : 9437184 ))
for step in 1 2 3; do echo "{\"step\":$step,\"rank\":$rank,\"step_time_s\":0.01,\"peak_bytes\":$peak}" >> "$metrics"; done
FAKE
chmod +x "$T/fake_dtrun_stages.sh"
out=$("$DTPLAN" validate --execute --model "$M/gpt-tiny.json" --nodes 1 --gpus 2 --device cpu --pp 2 --top 3 --steps 3 --rounds 1 \
        --dtrun "$T/fake_dtrun_stages.sh" --work-dir "$T/stages" --json 2>"$T/stages.err")
if echo "$out" | python3 -c '
import json, sys
d = json.load(sys.stdin); ps = d["plans"]; assert len(ps) == 3, ps
worst = 0
for p in ps:
    errs = [(pr - me) / me for pr, me in zip(p["stage_predicted_bytes"], p["stage_measured_bytes"])]
    k = max(range(len(errs)), key=lambda i: abs(errs[i]))
    assert p["worst_stage"] == k and abs(p["worst_stage_memory_error"] - errs[k]) < 1e-12, (p, errs)
    worst = max(worst, abs(errs[k]))
assert abs(d["memory_max_error"] - worst) < 1e-12, d["memory_max_error"]
'; then
  echo "ok: validate --execute names each plan's worst stage and scores the worst of them"
else
  echo "FAIL: validate --execute worst stage"; echo "$out" | head -5; head -5 "$T/stages.err"; fails=$((fails+1))
fi

# Frameworks: export what the plan is in Megatron-LM / torchtitan / DeepSpeed, with launch lines.
expect 0 "--tensor-model-parallel-size 8" -- "$DTPLAN" export --plan "$T/p3.json" --to megatron
expect 0 "torchrun --nnodes 8 --nproc-per-node 8 --rdzv-backend c10d" -- "$DTPLAN" export --plan "$T/p3.json" --to megatron
expect 2 "torchtitan cannot run this model: no GPT-2/GPT-3 model" -- "$DTPLAN" export --plan "$T/p3.json" --to torchtitan
expect 2 "--to 'jax' is unknown" -- "$DTPLAN" export --plan "$T/p3.json" --to jax
expect 0 "torchtitan" -- "$DTPLAN" --model "$M/llama3-8b.json" --nodes 1 --gpus 8 --framework torchtitan --out "$T/tt.json"
expect 0 "data_parallel_shard_degree" -- "$DTPLAN" export --plan "$T/tt.json" --to torchtitan
expect 0 "the loss was priced as one fused pass over the logits" -- "$DTPLAN" export --plan "$T/tt.json" --to torchtitan
expect 0 "run it in a framework" -- "$DTPLAN" --model "$M/gpt3-175b.json" --nodes 8 --gpus 8 --framework deepspeed --out "$T/ds.json"
expect 0 '"train_micro_batch_size_per_gpu"' -- "$DTPLAN" export --plan "$T/ds.json" --to deepspeed
expect 0 "wrote" -- "$DTPLAN" --model "$M/gpt3-175b.json" --nodes 8 --gpus 8 --tp 8 --pp 8 --vpp 2 --schedule interleaved --no-sp --out "$T/il.json"
expect 2 "DeepSpeed cannot express this plan: no interleaved schedule.*replan with --framework deepspeed" -- "$DTPLAN" export --plan "$T/il.json" --to deepspeed
expect 2 "framework 'jax' is unknown" -- "$DTPLAN" --model "$M/gpt3-175b.json" --framework jax --out "$T/x.json"
# Import: a Megatron-LM job priced next to the best plan; flags dtplan cannot price are refused by name.
G=$SRC/tests/cli/megatron/gpt3_175b_args.sh
expect 0 "your config: +dp=1 tp=8 pp=16 mbs=1 m=1536 1f1b" -- "$DTPLAN" --from-megatron "@$G" --out "$T/mb.json"
expect 0 "(faster|as fast)" -- "$DTPLAN" --from-megatron "$(cat "$G")" --out "$T/mb.json"
expect 2 "flag --rampup-batch-size: dtplan does not know how it changes" -- "$DTPLAN" --from-megatron "$(cat "$G") --rampup-batch-size 16 16 5859375" --out "$T/x.json"
# --attention-backend fused is cuDNN's kernel: exported for a plan priced with it, imported as it.
"$DTPLAN" --model "$M/llama3-8b.json" --nodes 1 --gpus 8 --profile h100 --attention-kernel cudnn --out "$T/cu.json" >/dev/null 2>&1
"$DTPLAN" export --plan "$T/cu.json" --to megatron --out "$T/cu.sh" >/dev/null 2>&1
expect 0 "your config: .*cudnn-attn" -- "$DTPLAN" --from-megatron "@$T/cu.sh" --nodes 1 --gpus 8 --profile h100 --out "$T/cu2.json"
expect 2 "the job's --attention-backend fused .* has no cuDNN attention curve" -- "$DTPLAN" --from-megatron "@$T/cu.sh" --nodes 1 --gpus 8 --out "$T/x.json"
expect 2 "--attention-kernel default: the job selects cuDNN" -- "$DTPLAN" --from-megatron "@$T/cu.sh" --nodes 1 --gpus 8 --profile h100 --attention-kernel default --out "$T/x.json"
# The job's flags fix its sequence, batch, attention and loss: dtplan's own are refused, not ignored;
# --trace, --report and --json work as for a search.
expect 2 "takes the sequence length from the job's --seq-length" -- "$DTPLAN" --from-megatron "@$T/cu.sh" --nodes 1 --gpus 8 --profile h100 --seq-length 1024 --out "$T/x.json"
expect 2 "takes the global batch from the job's --global-batch-size" -- "$DTPLAN" --from-megatron "@$T/cu.sh" --nodes 1 --gpus 8 --profile h100 --global-batch 16 --out "$T/x.json"
expect 2 "takes the attention core from the job's --attention-backend" -- "$DTPLAN" --from-megatron "@$T/cu.sh" --nodes 1 --gpus 8 --profile h100 --attention unfused --out "$T/x.json"
expect 2 "takes the loss kernel from the job's" -- "$DTPLAN" --from-megatron "@$T/cu.sh" --nodes 1 --gpus 8 --profile h100 --cross-entropy fused --out "$T/x.json"
expect 0 "and trace .* and report" -- "$DTPLAN" --from-megatron "@$T/cu.sh" --nodes 1 --gpus 8 --profile h100 --trace "$T/fm-trace.json" --report "$T/fm.html" --out "$T/cu3.json"
[ -s "$T/fm-trace.json" ] && [ -s "$T/fm.html" ] && echo "ok: --from-megatron wrote its trace and report" || { echo "FAIL: --from-megatron --trace/--report"; fails=$((fails + 1)); }
if "$DTPLAN" --from-megatron "@$T/cu.sh" --nodes 1 --gpus 8 --profile h100 --json --out "$T/cu4.json" 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
f = d["from_megatron"]
assert f["prediction"]["step_time_s"] > 0 and f["best_speedup"] >= 1.0 and d["top"], f
assert f["plan"]["attention_kernel"] == "cudnn"
'; then echo "ok: --from-megatron --json prints one JSON object"; else echo "FAIL: --from-megatron --json"; fails=$((fails + 1)); fi
expect 2 "the world size is unknown" -- "$DTPLAN" --from-megatron "--num-layers 2 --hidden-size 64 --num-attention-heads 4 --seq-length 64 --micro-batch-size 1 --vocab-size 100 --bf16" --out "$T/x.json"
# Round trip: the best plan exported to Megatron-LM and imported back is that same plan.
"$DTPLAN" export --plan "$T/mb.json" --to megatron > "$T/mb.sh" 2>&1
best=$(python3 -c "import json; p=json.load(open('$T/mb.json'))['plan']; print(p['dp'], p['tp'], p['pp'], p['vpp'])")
out=$("$DTPLAN" --from-megatron "@$T/mb.sh" --out "$T/mb2.json" 2>&1)
mine=$(echo "$out" | sed -n 's/^your config: *\(dp=[0-9]* tp=[0-9]* pp=[0-9]*\( vpp=[0-9]*\)\?\).*/\1/p')
echo "$out" | grep -q "your config is as fast as the best plan found" && echo "$mine" | grep -q "^dp=${best%% *} " \
  && echo "ok: megatron export -> import round trip ($mine)" || { echo "FAIL: megatron round trip ($best / $mine)"; echo "$out" | tail -4; fails=$((fails+1)); }
[ ! -e "$T/x.json" ] || { echo "FAIL: a failed run wrote its --out file"; fails=$((fails+1)); }

# nccl-tests logs as a profile source: the collective tables from the logs, the rest from --base;
# the profile plans 2 nodes; malformed logs exit 2 naming the file and the line.
NT=$SRC/tests/planner/nccl_tests
expect 0 "all_reduce, 16 ranks on 2 host\(s\).*collectives.all_reduce.inter\[8\]" -- "$DTPLAN" profile --from-nccl-tests "$NT/h100" --base h100 --out "$T/nccl.json"
expect 0 "rank +dp +tp +pp" -- "$DTPLAN" --model "$M/llama3-8b.json" --nodes 2 --gpus 8 --profile "$T/nccl.json" --out "$T/n1.json"
expect 2 "needs --base PROFILE" -- "$DTPLAN" profile --from-nccl-tests "$NT/h100"
expect 2 "does not exist" -- "$DTPLAN" profile --from-nccl-tests "$T/no-logs" --base h100 --out "$T/x.json"
mkdir -p "$T/bad"
sed '30s/^\( *[0-9]* *[0-9]* *float *sum *-1 *[0-9.]* *[0-9.]*\) *[0-9.]*/\1  999.99/' "$NT/h100/all_reduce_perf_1node.txt" > "$T/bad/all_reduce.txt"
expect 2 "bad/all_reduce.txt:30: busbw 999.99 GB/s is not algbw" -- "$DTPLAN" profile --from-nccl-tests "$T/bad" --base h100 --out "$T/x.json"
head -25 "$NT/h100/all_gather_perf_1node.txt" > "$T/bad/all_reduce.txt"; echo "    16777216" >> "$T/bad/all_reduce.txt"
expect 2 "bad/all_reduce.txt:26: result row has 1 columns" -- "$DTPLAN" profile --from-nccl-tests "$T/bad" --base h100 --out "$T/x.json"
sed '24s/      0$/      7/' "$NT/h100/reduce_scatter_perf_1node.txt" > "$T/bad/all_reduce.txt"
expect 2 "bad/all_reduce.txt:24: nccl-tests found 7 wrong elements" -- "$DTPLAN" profile --from-nccl-tests "$T/bad" --base h100 --out "$T/x.json"

if [ "$fails" -ne 0 ]; then echo "$fails failure(s)"; exit 1; fi
echo "all dtplan CLI checks passed"
