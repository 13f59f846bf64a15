# plots/max_batch.gp — the batch each mesh ran at, against its TP degree: per DP rank and global.
# In "max" mode that is the largest batch that fits the budget (found by the plan and confirmed by
# probe runs), so it shows how sharding the model across TP ranks frees memory for activations.
# Data: max_batch.dat, columns: tp, dp, batch per DP rank, global batch (dp × batch), mesh, and its index
# among the meshes of its TP degree (several with HSDP meshes RxSxT): their labels stack upwards.
# Variables: mode ('max' or 'fixed'), budget (the budget as written, e.g. '96MiB', or '').
set logscale x 2
set xtics 2
stats 'max_batch.dat' using 4:6 nooutput
lstep = STATS_max_x > 0 ? STATS_max_x * 0.08 : 1
set offsets graph 0.08, graph 0.08, graph (0.12 + 0.1 * STATS_max_y), 0
set yrange [0:*]
set xlabel "TP degree (ranks per tensor-parallel group)"
set ylabel "batch (sequences)"
if (mode eq 'max') {
    set title sprintf("%s: largest batch that fits %s per rank, by TP degree", name, budget)
} else {
    set title sprintf("%s: batch size by TP degree", name)
}
plot 'max_batch.dat' using 1:3 with linespoints lt 1 pt 7 ps 1.4 title 'batch per DP rank', \
     'max_batch.dat' using 1:4 with linespoints lt 2 pt 5 ps 1.4 title 'global batch (dp × batch)', \
     'max_batch.dat' using 1:($4 + $6 * lstep):5 with labels offset 0, 1.2 notitle
