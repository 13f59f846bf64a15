# plots/memory.gp — peak memory per rank of every mesh, stacked by category, against the budget.
# Data: memory.dat, columns: mesh label, then MiB for params, grads, optimizer, gathered,
# activations, workspace, comm (the breakdown at the moment of the total peak of the most loaded
# rank, so the stack sums to the peak), then the peak of
# the total (a point on top of the stack).
# Variables: n (number of meshes), budget_mib (the per-rank budget in MiB; <= 0 for none).
cats = "params grads optimizer gathered activations workspace comm"
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.7
set xrange [-0.6:n-0.4]
set yrange [0:*]
set title sprintf("%s: peak memory per rank by category", name)
set xlabel "mesh (dp x tp, or R x S x T: HSDP replicate x shard x tp)"
set ylabel "memory per rank (MiB)"
if (budget_mib > 0) {
    plot for [c=2:8] 'memory.dat' using c:xtic(1) title word(cats, c-1), \
         'memory.dat' using 0:9 with points pt 7 ps 1.6 lc rgb 'black' title 'peak (total)', \
         budget_mib with lines dt 2 lw 2 lc rgb '#c00000' title sprintf('budget %.1f MiB', budget_mib)
} else {
    plot for [c=2:8] 'memory.dat' using c:xtic(1) title word(cats, c-1), \
         'memory.dat' using 0:9 with points pt 7 ps 1.6 lc rgb 'black' title 'peak (total)'
}
