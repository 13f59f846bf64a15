# plots/common.gp — the look shared by every sweep chart. build/sweep runs gnuplot in the sweep's
# folder as `gnuplot -e "fmt='png'; out='loss.png.tmp'; ..." plots/common.gp plots/<chart>.gp`,
# so this file is loaded first and the chart script after it. Not a chart by itself.
#   fmt   'png' (pngcairo) or 'svg'
#   out   the output file (the runner renames it into place when gnuplot succeeds)
#   name  the sweep's name, used in titles
if (!exists("fmt")) fmt = 'png'
#   width  the canvas width in pixels (default 960; wider for a grid's many cells)
#   rotate 1 to slant the x labels (a grid's long cell names)
if (!exists("name")) name = 'sweep'
if (!exists("width")) width = 960
if (fmt eq 'svg') {
    set terminal svg size width,600 dynamic noenhanced font 'Sans,12' background rgb 'white'
} else {
    set terminal pngcairo size width,600 noenhanced font 'Sans,11' background rgb 'white'
}
set output out
set border 3
set tics nomirror
set grid ytics lc rgb '#d8d8d8'
set key outside right top
if (exists("rotate") && rotate) { set xtics rotate by -35 }
# One color per mesh, in the order of the spec's meshes (lc 1, 2, ...).
set linetype 1 lc rgb '#1f77b4' lw 2
set linetype 2 lc rgb '#ff7f0e' lw 2
set linetype 3 lc rgb '#2ca02c' lw 2
set linetype 4 lc rgb '#d62728' lw 2
set linetype 5 lc rgb '#9467bd' lw 2
set linetype 6 lc rgb '#8c564b' lw 2
set linetype 7 lc rgb '#e377c2' lw 2
set linetype 8 lc rgb '#7f7f7f' lw 2
set linetype cycle 8
