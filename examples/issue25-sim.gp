# issue25-sim.gp - issue 25's failure class in bqos-sim: served / R per QoS period of the single-server buckets and the unlimited four-server ones, pshift-paced and rr (examples/issue25-sim.json).
#
# bin/bqos-sim --scenario examples/issue25-sim.json -p pshift-paced,rr -q --csv issue25.csv
# gnuplot -e "csv='issue25.csv'; out='issue25.png'" examples/issue25-sim.gp
# The CSV is bqos-sim's --csv: policy,period,bucket,reserved,served,ratio
# (periods counted from the first measured one, period 2 of the run).
if (!exists("csv")) csv = "issue25.csv"
if (!exists("out")) out = "issue25.png"
set terminal pngcairo size 1200, 420 font ",9"
set output out
set datafile separator ","
set multiplot layout 1, 2 title "Issue 25 in bqos-sim: 6 servers, 12 buckets, 75% reserved, 8 in flight per bucket and server, adaptive backend window; s1 at 60% in periods 6-8"
set grid
set logscale y
set yrange [0.2:12]
set ytics (0.25, 0.5, 0.75, 1, 2, 4, 8)
set xlabel "QoS period"
set xrange [1.5:11.5]
set ylabel "served / reservation"
set key right center opaque box
sel(p, b) = (strcol(1) eq p && $3 == b) ? $6 : NaN
do for [pol in "pshift-paced rr"] {
    set title pol
    plot csv using ($2 + 2):(sel(pol, 0)) skip 1 with points ps 1.2 pt 7 lc rgb "#d02020" title "b0 (s0 only)", \
         csv using ($2 + 2):(sel(pol, 1)) skip 1 with points ps 1.2 pt 5 lc rgb "#ff8000" title "b1 (s1 only)", \
         csv using ($2 + 2):(sel(pol, 10)) skip 1 with points ps 1.2 pt 9 lc rgb "#a06000" title "b10 (s2 only)", \
         csv using ($2 + 2):(sel(pol, 2)) skip 1 with points ps 1.2 pt 13 lc rgb "#2060ff" title "b2 (unlimited, 4 servers)", \
         csv using ($2 + 2):(sel(pol, 3)) skip 1 with points ps 1.2 pt 11 lc rgb "#40a0ff" title "b3 (unlimited, 4 servers)", \
         1 with lines lw 1.5 lc rgb "black" title "R"
}
unset multiplot
