# plots/throughput.gp — tokens per second of every mesh, as bars: global (all ranks) on the left,
# per rank on the right (they differ by the world size, so they get separate axes).
# Data: throughput.dat, columns: mesh label, global tok/s, tok/s per rank (0 for a run without
# a measurement; its label says its status). Variables: world (ranks per run).
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.8
set yrange [0:*]
set xlabel "mesh (dp x tp)"
set key off
set multiplot layout 1,2 title sprintf("%s: training throughput per mesh (%d ranks)", name, world)
set title "global"
set ylabel "tokens/s (all ranks)"
plot 'throughput.dat' using 2:xtic(1) lt 1
set title "per rank"
set ylabel "tokens/s per rank"
plot 'throughput.dat' using 3:xtic(1) lt 2
unset multiplot
