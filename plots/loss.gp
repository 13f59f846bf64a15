# plots/loss.gp — training loss of every mesh on one chart (loss.png, loss_tokens.png, loss_time.png).
# Data, one file per mesh, written by build/sweep next to the chart:
#   loss_<mesh>.dat   columns: step, training loss, tokens seen (step × global batch × seq len),
#                     seconds (sum of the step times up to that step)
#   eval_<mesh>.dat   columns: step, eval loss, tokens seen, seconds (only for meshes listed in `evals`)
# Variables: meshes ('1x8 2x4 ...', the meshes that have steps), evals (meshes with eval points),
#   evalidx (their positions in `meshes`, for matching colors), xaxis ('step', 'tokens' or 'time').
if (!exists("evals")) evals = ''
if (!exists("evalidx")) evalidx = ''
if (!exists("xaxis")) xaxis = 'step'
bytokens = (xaxis eq 'tokens')
bytime = (xaxis eq 'time')
col = bytokens ? 3 : (bytime ? 4 : 1)
set title sprintf("%s: training loss vs %s", name, bytokens ? "tokens seen" : (bytime ? "training time" : "step"))
set xlabel (bytokens ? "tokens seen (step × global batch × seq len)" : (bytime ? "seconds (sum of step times)" : "step"))
set ylabel "loss (cross-entropy, nats per token)"
if (bytokens) { set format x '%.1s%c' }
n = words(meshes)
ne = words(evals)
if (n == 0) {
    set label 1 "no run produced any training steps" at graph 0.5, 0.5 center
    set xrange [0:1]
    set yrange [0:1]
    plot NaN notitle
} else {
    if (ne == 0) {
        plot for [i=1:n] sprintf('loss_%s.dat', word(meshes, i)) using col:2 \
            with lines lt i title word(meshes, i)
    } else {
        plot for [i=1:n] sprintf('loss_%s.dat', word(meshes, i)) using col:2 \
                with lines lt i title word(meshes, i), \
             for [i=1:ne] sprintf('eval_%s.dat', word(evals, i)) using col:2 \
                with points lt int(word(evalidx, i)) pt 7 ps 1.3 title word(evals, i).' eval'
    }
}
