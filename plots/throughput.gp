# plots/throughput.gp — tokens per second of every mesh, as bars: global (all ranks), per rank (they
# differ by the world size, so they get separate axes), and MFU twice: against one core per rank, and
# against the compute share each rank had (peak × min(1, cores/ranks) per host).
# Data: throughput.dat, columns: mesh label, global tok/s, tok/s per rank, MFU %, MFU (core share) %
# (0 for a run without a measurement, its label saying its status; MFU share 0 when n/a).
# Variables: world (ranks per run), n (number of meshes).
# Each panel is a third of the canvas wide: the x label stays short (the title says what R x S x T is),
# the mesh names slant when there are more than four (HSDP names such as 2x2x2 would run together), and
# the MFU panel's key sits inside it, above the bars (below the panel it would push that panel's axis
# up, out of line with the other two, and cover the x label).
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.8
set yrange [0:*]
set xlabel "mesh (dp x tp, or R x S x T)"
if (n > 4) { set xtics rotate by -35 }
set key off
set multiplot layout 1,3 title sprintf("%s: training throughput per mesh (%d ranks; HSDP mesh R x S x T: replicate x shard x tp)", name, world)
set title "global"
set ylabel "tokens/s (all ranks)"
plot 'throughput.dat' using 2:xtic(1) lt 1
set title "per rank"
set ylabel "tokens/s per rank"
plot 'throughput.dat' using 3:xtic(1) lt 2
set ylabel "MFU, % of peak"
set key inside top left vertical Left reverse
set offsets 0, 0, graph 0.3, 0
# above 100% is no real utilisation but a loaded host (docs/metrics.md; report.md marks such values
# with *): then a dashed line at 100 shows which bars are past it
stats 'throughput.dat' using 4 nooutput name 'M1'
stats 'throughput.dat' using 5 nooutput name 'M2'
if (M1_max > 100 || M2_max > 100) {
    set title "MFU (%; above 100: host loaded)"
    plot 'throughput.dat' using 4:xtic(1) lt 3 title "1 core per rank", '' using 5 lt 4 title "core share (0: n/a)", \
         100 with lines dt 2 lw 1.5 lc rgb '#555555' title "100%"
} else {
    set title "MFU (%)"
    plot 'throughput.dat' using 4:xtic(1) lt 3 title "1 core per rank", '' using 5 lt 4 title "core share (0: n/a)"
}
unset multiplot
