# plots/prediction.gp — the step time of every mesh: measured (the median after the warm-up steps) next to
# what build/train predicted before step 1 from the machine model (core/cost/); a plan has only the
# predicted bars. Data: prediction.dat, columns: mesh label, measured ms, predicted ms (0: none).
# Variables: world (ranks per run), plan_only.
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set yrange [0:*]
set xlabel "mesh (dp x tp, or R x S x T: HSDP replicate x shard x tp)"
set ylabel "step time (ms)"
# the key at the right (common.gp): below the chart it touched the x label
if (plan_only) {
  set title sprintf("%s: predicted step time per mesh (%d ranks)", name, world)
  plot 'prediction.dat' using 3:xtic(1) lt 2 title "predicted"
} else {
  set title sprintf("%s: step time per mesh, measured and predicted (%d ranks)", name, world)
  plot 'prediction.dat' using 2:xtic(1) lt 1 title "measured (median)", '' using 3 lt 2 title "predicted (before step 1)"
}
