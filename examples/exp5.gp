# exp5.gp - Experiment 5 like Fig. 10 of the pShift paper: (a) the buckets' Zipf reservations, (b)/(c) IOs each bucket completed in the first and second QoS period against its reservation and limit.
#
# gnuplot -e "csv='out/exp5/exp5.csv'; out='out/exp5/exp5.png'; heading='...'" examples/exp5.gp
# The CSV (written by examples/exp5.sh) has columns
#   index,bucket,reservation,limit,qos_p1,qos_p2,rr_p1,rr_p2
# with reservation and limit in IOs per period; rr columns may be empty.
if (!exists("csv")) csv = "exp5.csv"
if (!exists("out")) out = "exp5.png"
if (!exists("heading")) heading = "Experiment 5"
set terminal pngcairo size 1500, 420 font ",9"
set output out
set datafile separator ","
set datafile missing ""
set multiplot layout 1, 3 title heading
set grid
set xlabel "bucket (by reservation)"
set key right top
set title "(a) reservations (IOs per period)"
plot csv using 1:3 skip 1 with impulses lc rgb "#4060c0" title "reservation"
set ylabel "IOs completed in the period"
set title "(b) first QoS period"
plot csv using 1:5 skip 1 with impulses lc rgb "#2080ff" title "pShift", \
     csv using 1:7 skip 1 with points pt 7 ps 0.35 lc rgb "#ff8000" title "rr (no QoS)", \
     csv using 1:3 skip 1 with lines lw 1.5 lc rgb "black" title "reservation", \
     csv using 1:4 skip 1 with lines dt 2 lc rgb "red" title "limit"
set title "(c) second QoS period"
plot csv using 1:6 skip 1 with impulses lc rgb "#2080ff" title "pShift", \
     csv using 1:8 skip 1 with points pt 7 ps 0.35 lc rgb "#ff8000" title "rr (no QoS)", \
     csv using 1:3 skip 1 with lines lw 1.5 lc rgb "black" title "reservation", \
     csv using 1:4 skip 1 with lines dt 2 lc rgb "red" title "limit"
unset multiplot
