# cumulative.gp - cumulative completed requests per bucket over time, one panel per policy (like Fig. 8 and 9 of the pShift paper).
#
# gnuplot -e "files='a/cumulative.csv b/cumulative.csv'; titles='rr pShift'; out='x.png'; heading='Experiment 3'" examples/cumulative.gp
# Optional: res=R draws the line R*t (a reservation of R IOs/s); lim=L the line L*t.
if (!exists("files")) files = "cumulative.csv"
if (!exists("titles")) titles = files
if (!exists("out")) out = "cumulative.png"
if (!exists("heading")) heading = "Completed requests per bucket"
n = words(files)
set terminal pngcairo size (520 * n), 420 font ",9"
set output out
set termoption noenhanced
set datafile separator ","
set multiplot layout 1, n title heading
set xlabel "time (s)"
set ylabel "completed requests (cumulative)"
set grid
set key left top
set format y "%.0s%c"
do for [k = 1:n] {
    f = word(files, k)
    stats f skip 1 nooutput
    nc = STATS_columns
    set title word(titles, k)
    if (nc > 13) { unset key } else { set key left top }
    if (exists("res") && exists("lim")) {
        plot for [i = 2:nc] f using 1:i with linespoints pt 7 ps 0.4 title columnhead(i), \
             res * x with lines dt 2 lc rgb "black" title "reservation", \
             lim * x with lines dt 3 lc rgb "red" title "limit"
    } else {
        if (exists("res")) {
            plot for [i = 2:nc] f using 1:i with linespoints pt 7 ps 0.4 title columnhead(i), \
                 res * x with lines dt 2 lc rgb "black" title "reservation"
        } else {
            plot for [i = 2:nc] f using 1:i with linespoints pt 7 ps 0.4 title columnhead(i)
        }
    }
}
unset multiplot
