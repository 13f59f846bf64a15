# plots/axis.gp — one axis of a grid sweep (max_batch_<axis>.png, throughput_<axis>.png): against the
# TP degree, one line per value of the axis; one panel per setting of the other axes (their values
# in the panel's title), so every cell appears once and no line joins cells of different settings.
# Data: axis_<short>.dat, written by build/sweep: one block (gnuplot `index`) per panel and value, in
# that order (panel 1 value 1, panel 1 value 2, ...), rows: tp, batch per DP rank, global batch,
# tokens/s, cell (0: no measurement).
# Variables: axis (short name, 'ac'), axiskey (spec key), values ('none full every:2'), panels (one
#   word per panel, 'seq=4096,sp=off'; 'all' when the axis is the only one), metric ('batch' or
#   'tok_s'), data (the file), mode ('max' when the batch is the largest that fits), budget.
nv = words(values)
np = words(panels)
col = (metric eq 'tok_s') ? 4 : 2
set logscale x 2
set xtics 2 norotate
set offsets graph 0.08, graph 0.08, graph 0.12, 0
set yrange [0:*]
set xlabel "TP degree"
set ylabel ((metric eq 'tok_s') ? "tokens/s (all ranks)" : "batch per DP rank (sequences)")
what = (metric eq 'tok_s') ? "tokens/s" : ((mode eq 'max') ? sprintf("largest batch that fits %s", budget) : "batch")
ncols = (np < 3) ? np : 3
nrows = int((np + ncols - 1) / ncols)
set key outside right top
set multiplot layout nrows, ncols title sprintf("%s: %s by TP degree, one line per %s (%s)", name, what, axiskey, axis)
do for [p=1:np] {
    if (np > 1) { set title word(panels, p) } else { unset title }
    plot for [v=1:nv] data index ((p - 1) * nv + v - 1) using 1:col with linespoints lt v pt 7 ps 1.2 \
        title sprintf("%s=%s", axis, word(values, v))
}
unset multiplot
