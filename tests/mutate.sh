#!/usr/bin/env bash
# tests/mutate.sh — mutation check of the test suite (not part of `make test`; slow): each planted bug
# below is applied, one at a time, to a scratch copy of the working tree (with a copy of build/ so
# only what changed is rebuilt), the copy is built, and the suites named for that bug are run there
# with tests/run.sh. A bug is "caught" when one of its suites fails. Prints a table and exits 1 if any
# bug was not caught, could not be applied (its code changed: update the pattern) or did not build.
#   bash tests/mutate.sh            every mutation
#   bash tests/mutate.sh 3 7        only mutations 3 and 7 (numbers as in the table)
# Each mutation is: description, perl regex, replacement, files searched, suites (ONLY= substrings).
# The regex must match exactly once in exactly one of the files searched; the replacement is
# literal text (no escapes).
set -u
cd "$(dirname "$0")/.."
ROOT=$(pwd)
M=()
mut() { M+=("$@"); }   # DESCRIPTION REGEX REPLACEMENT FILES SUITES
mut 'AdamW without bias correction' \
    'float bc1 = \(float\)\(1\.0 - pow\(beta1, t\)\), bc2 = \(float\)\(1\.0 - pow\(beta2, t\)\);' \
    'float bc1 = 1.0f, bc2 = 1.0f; (void)t;' \
    'core/*/*.c' \
    'test_optim t_reference'
mut 'weight decay applied to norm weights' \
    'u->seg\[k\]\.decay \? wd : 0\.0f' \
    'wd' \
    'core/*/*.c' \
    'test_optim t_reference'
mut 'clip coefficient computed but not applied' \
    'if \(coef < 1\.0\) gscale = \(float\)coef;' \
    'if (coef < 1.0) (void)coef;' \
    'core/*/*.c' \
    'test_optim t_reference'
mut 'the fused AdamW step does not zero the gradients at dp = 1' \
    'const int zero_g = f->dp->size == 1;' \
    'const int zero_g = 0;' \
    'core/*/*.c' \
    'test_optim'
mut 'a dp = 1 backward trusts a gradient no step has zeroed' \
    'if \(first && !u->g_zero\) f->E->ops->zero' \
    'if (0) f->E->ops->zero' \
    'core/*/*.c' \
    'test_optim'
mut 'cosine warmup off by one step' \
    'c->lr \* \(s \+ 1\) / c->warmup' \
    'c->lr * s / c->warmup' \
    'core/*/*.c' \
    'test_optim t_reference'
mut 'budget check > becomes >=' \
    'bytes > st->budget - st->total_cur\)' \
    'bytes >= st->budget - st->total_cur)' \
    'core/*/*.c' \
    'test_mem t_budget'
mut 'runtime budget enforcement removed (only the pre-run plan refuses)' \
    'if \(!a->plan\) a->oom\(st\);' \
    ';' \
    'core/*/*.c' \
    'test_mem'
mut 'AdamW v allocated under grads' \
    'u->v = mem_calloc\(&f->E->mem, MEM_OPTIMIZER, b\);' \
    'u->v = mem_calloc(&f->E->mem, MEM_GRADS, b);' \
    'core/*/*.c' \
    'test_mem'
mut 'eval loss divided by the local token count' \
    'return sum / \(\(double\)nb \* R->G \* R->T\);' \
    'return sum / ((double)nb * R->B * R->T);' \
    'core/*/*.c bench/*.c' \
    't_reference'
mut 'divergence check ignoring a non-finite grad norm' \
    'if \(!isfinite\(loss\) \|\| !isfinite\(norm\)\)' \
    'if (!isfinite(loss))' \
    'core/*/*.c bench/*.c' \
    't_reference'
mut 'RoPE wrong only from position 32 on' \
    'double a = \(double\)t \* inv_freq\[i\];' \
    'double a = (double)(t ? t - 1 : 0) * inv_freq[i];' \
    'kernels/cpu/*.c' \
    't_reference'
mut 'grad norm counting replicated norm weights on every TP rank' \
    'fsdp_grad_sumsq\(&M->fsdp, M->mesh\.tp_rank == 0\)' \
    'fsdp_grad_sumsq(&M->fsdp, 1)' \
    'core/*/*.c' \
    'test_optim t_reference'
mut 'vocab-parallel loss: pad logits not masked in the sum of exponentials' \
    'o->ce_sumexp\(se, logits, mx, rows, s->Vl, s->v_valid\);' \
    'o->ce_sumexp(se, logits, mx, rows, s->Vl, s->Vl);' \
    'core/*/*.c' \
    'tp_loss'
mut 'allocator: at_peak not updated at a new total peak' \
    'st->total_peak = st->total_cur;\n        memcpy\(st->at_peak, st->cur, sizeof st->at_peak\);' \
    'st->total_peak = st->total_cur;' \
    'core/*/*.c' \
    'test_mem'
mut 'runner: program output counted as results' \
    'p=\$\(grep -c .\^ok . "\$res"\)' \
    'p=$(grep -c "^ok " "$log")' \
    'tests/run.sh' \
    't_runner'
mut 'compare.py: NaN parameters pass' \
    'if not \(math\.isfinite\(x\) and math\.isfinite\(y\)\):' \
    'if False:' \
    'tests/tools/compare.py' \
    't_runner'
# issue 40: bugs that escaped the suite, and code no mutation had reached
mut 'attention softmax without its max shift (row max replaced by 0)' \
    'const float mx = maxf\(s, n\);' \
    'const float mx = 0.0f;' \
    'kernels/cpu/*.c' \
    'test_kernels'
mut 'step timeline ends without waiting for the communication stream' \
    'double end = maxd\(maxd\(th, tc\), tm\);' \
    'double end = maxd(th, tc);' \
    'core/*/*.c' \
    'test_cost'
mut 'step timeline ends without the host clock' \
    'double end = maxd\(maxd\(th, tc\), tm\);' \
    'double end = maxd(tc, tm);' \
    'core/*/*.c' \
    'test_cost'
mut 'FSDP shards computed from the unpadded unit size' \
    'u->shard = u->padded / dp;' \
    'u->shard = u->numel / dp;' \
    'core/*/*.c' \
    't_mesh t_reference'
mut 'accumulation: the gradient of N micro-batches not divided by N' \
    'loss \+= model_forward_backward\(M, R->in, R->tg, \(float\)scale\);' \
    'loss += model_forward_backward(M, R->in, R->tg, (float)(scale * R->J.N));' \
    'core/*/*.c' \
    't_accum t_reference'
mut '--accum-reduce last: the unsharded gradient restarts from zero each micro-batch' \
    'if \(f->reduce_last && !first\) \{ drop_replicated\(f, u, u->full_g, 0, u->padded\); return; \}' \
    'if (f->reduce_last && !first) mem_free(&f->E->mem, u->full_g);' \
    'core/*/*.c' \
    't_accum t_reference'
mut 'every:K recomputes the last layer of each K instead of the first' \
    'return o->checkpoint > 0 && i % o->checkpoint == 0;' \
    'return o->checkpoint > 0 && (i + 1) % o->checkpoint == 0;' \
    'core/*/*.c' \
    'test_cost'
mut 'run records and plans written in place (no temp file, no rename)' \
    'snprintf\(tmp, sizeof tmp, "%s\.tmp\.%ld", path, \(long\)getpid\(\)\);\n    char \*s = json_dumps' \
    'snprintf(tmp, sizeof tmp, "%s", path);
    char *s = json_dumps' \
    'core/*/*.c' \
    't_atomic'
mut 'checkpoints written in place' \
    'snprintf\(w->tmp, sizeof w->tmp, "%s\.tmp\.%ld", path, \(long\)getpid\(\)\);' \
    'snprintf(w->tmp, sizeof w->tmp, "%s", path);' \
    'core/*/*.c' \
    't_atomic'
mut 'token files written in place' \
    'snprintf\(o->tmp, sizeof o->tmp, "%s\.tmp\.%ld", o->path, \(long\)getpid\(\)\);' \
    'snprintf(o->tmp, sizeof o->tmp, "%s", o->path);' \
    'core/*/*.c' \
    't_atomic'
mut 'sweep files written in place' \
    'int n = snprintf\(tmp, sizeof tmp, "%s\.tmp\.%ld", path, \(long\)getpid\(\)\);' \
    'int n = snprintf(tmp, sizeof tmp, "%s", path);' \
    'core/*/*.c' \
    't_atomic'
mut 'GQA under TP: a rank takes the k_proj rows at its query-head offset' \
    '\[S_K\]    = \{\.name = "self_attn\.k_proj\.weight",         \.rows = kv, \.cols = d,  \.split = SPLIT_ROWS, \.full_rows = kvf, \.full_cols = d,  \.row0 = t \* kv,' \
    '[S_K]    = {.name = "self_attn.k_proj.weight",         .rows = kv, .cols = d,  .split = SPLIT_ROWS, .full_rows = kvf, .full_cols = d,  .row0 = t * q,' \
    'core/*/*.c' \
    't_mesh t_reference'
mut 'a buffer left out of the memory plan (the RoPE table allocated only in a real run)' \
    'M->rope = mem_alloc\(&E->mem, MEM_WORKSPACE, nrope \* sizeof\(float\)\);\n    if \(!E->plan\) \{' \
    'if (!E->plan) {
        M->rope = mem_alloc(&E->mem, MEM_WORKSPACE, nrope * sizeof(float));' \
    'core/*/*.c' \
    'test_model t_memory'
mut 'vocab-parallel loss: row maxima not combined across the TP group' \
    'comm_all_reduce_max\(t->g, mx, \(size_t\)rows\);' \
    ';' \
    'core/*/*.c' \
    'tp_loss'
mut 'vocab-parallel loss: sums of exponentials not summed across the TP group' \
    'comm_all_reduce_sum\(t->g, se, 2 \* \(size_t\)rows\);' \
    'comm_all_reduce_sum(t->g, tl, (size_t)rows);' \
    'core/*/*.c' \
    'tp_loss'
mut 'HSDP: the replica all-reduce after every micro-batch (the next one re-sums the replicas)' \
    'f->rep->size > 1 && accum_last\(f\)\)' \
    'f->rep->size > 1)' \
    'core/*/*.c' \
    't_mesh'
mut 'HSDP: the gradient norm counts every replica' \
    'M->mesh\.rep_rank == 0 \? fsdp_grad_sumsq' \
    '1 ? fsdp_grad_sumsq' \
    'core/*/*.c' \
    't_mesh'
mut 'HSDP: no replica all-reduce at S = 1' \
    'if \(f->dp->size == 1\) \{ u->full_g = NULL; replica_reduce\(f, u\); return; \}' \
    'if (f->dp->size == 1) { u->full_g = NULL; return; }' \
    'core/*/*.c' \
    't_mesh'
mut 'k ranks per host across hosts: k ports not bounded by the host'"'"'s NVLink figure' \
    'if \(in && in->npts == 0 && in->busbw_gbs < k\.busbw_gbs\) k\.busbw_gbs = in->busbw_gbs;' \
    '(void)in;' \
    'core/*/*.c' \
    't_colltable test_cost'
mut 'folded dq: the second n-tile of each pair never added' \
    'atomicAdd\(dq32 \+ \(size_t\)row \* ldq \+ col \+ 8, scale \* acc\[mt\]\[1\]\[i\]\);' \
    '(void)0;' \
    'kernels/cuda/attention_bwd.cu' \
    't_cuda_emu'
mut 'folded dq: dS read before every warp has written it' \
    '__syncthreads\(\); /\* every warp.s dS columns are written \*/' \
    '/* barrier removed */' \
    'kernels/cuda/attention_bwd.cu' \
    't_cuda_emu'
mut '--deterministic off never reaches the CUDA attention' \
    'if \(E->dev == &device_cuda\) cuda_attention_set_deterministic\(!fold\);' \
    '(void)fold;' \
    'core/*/*.c' \
    't_cuda_engine_emu'
mut 'calibration: the collectives timed back to back at the end, not spread' \
    'for \(int k = from; k < upto; k\+\+\) cost_calib_coll_round\(c->s\);' \
    '(void)from; (void)upto;' \
    'core/cost/calib_run.c' \
    't_cost'
sel=("$@")
SCRATCH=$(mktemp -d /tmp/meshsweep-mutate.XXXXXX); trap 'rm -rf "$SCRATCH"' EXIT
rows=(); bad=0
for ((i = 0; i < ${#M[@]} / 5; i++)); do
  n=$((i + 1))
  if [ ${#sel[@]} -gt 0 ] && ! printf '%s\n' "${sel[@]}" | grep -qx "$n"; then continue; fi
  desc=${M[5*i]} pat=${M[5*i+1]} rep=${M[5*i+2]} files=${M[5*i+3]} suites=${M[5*i+4]}
  W="$SCRATCH/m$n"; rm -rf "$W"; mkdir -p "$W"
  # the working tree (tracked and untracked, not ignored) plus build/ for incremental rebuilds
  git ls-files -co --exclude-standard -z | xargs -0 -I{} cp --parents -p {} "$W/" 2>/dev/null
  cp -a build "$W/build"; rm -rf "$W/build/test-logs"
  hits=""
  for f in $(cd "$W" && ls $files 2>/dev/null); do
    c=$(PAT="$pat" perl -0ne '$c = () = /$ENV{PAT}/g; print $c' "$W/$f")
    [ "$c" -gt 0 ] && hits="$hits $f:$c"
  done
  set -- $hits
  if [ $# -ne 1 ] || [ "${1##*:}" -ne 1 ]; then
    rows+=("$n|$desc|$suites|NOT APPLIED (matches:${hits:- none})"); bad=1; rm -rf "$W"; continue
  fi
  f=${1%:*}
  PAT="$pat" REP="$rep" perl -0pi -e 's/$ENV{PAT}/$ENV{REP}/' "$W/$f"
  touch "$W/$f"
  if ! (cd "$W" && make -j2 all > "$SCRATCH/build$n.log" 2>&1); then
    rows+=("$n|$desc|$suites|BUILD FAILED ($f; $(grep -m1 error "$SCRATCH/build$n.log" | head -c 120))"); bad=1; rm -rf "$W"; continue
  fi
  caught=""
  for s in $suites; do
    if ! (cd "$W" && ONLY=$s bash tests/run.sh > "$SCRATCH/run$n-$s.log" 2>&1); then
      caught="$caught $s"
      echo "--- mutation $n ($desc), $s:" >&2; grep -E '^ +FAIL|FAIL ' "$SCRATCH/run$n-$s.log" | head -4 >&2
    fi
  done
  if [ -n "$caught" ]; then rows+=("$n|$desc|$suites|caught by$caught"); else rows+=("$n|$desc|$suites|NOT CAUGHT"); bad=1; fi
  rm -rf "$W"
done
printf '| # | planted bug | suites run | result |\n|---|---|---|---|\n'
for r in "${rows[@]}"; do IFS='|' read -r n d s c <<<"$r"; printf '| %s | %s | %s | %s |\n' "$n" "$d" "$s" "$c"; done
exit $bad
