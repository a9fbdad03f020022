# exp1.gp - Fig. 3 of the pShift paper from bqos-sim output: IOs per bucket per redistribution interval (stacked) for every 50th bucket, one panel per policy; and the reservations.
# Usage: gnuplot -e "dir='out/exp1'; sample=50" examples/exp1.gp   (reads dir/intervals-POLICY.csv)
# The y axis is logarithmic: reservations span a factor of 100 (Zipf 0.5 over
# 10,000 buckets), so a linear axis shows only the largest bucket.
if (!exists("dir")) dir = 'out/exp1'
if (!exists("sample")) sample = 50
set datafile separator ','
set terminal pngcairo size 1400,1000 font ",10"
set output dir.'/exp1.png'
set multiplot layout 2,2 title sprintf("IOs per bucket per redistribution interval (stacked, interval 1 at the bottom), every %dth bucket; black: reservation", sample)
set xlabel 'bucket'
set ylabel 'IOs in the QoS period'
set style fill solid 0.9 noborder
set key top right
set boxwidth 0.8 * sample
set autoscale xfix
set offsets sample,sample,0,0
set logscale y
set yrange [10:*]
# Columns: policy,period,bucket,reserved,i1..i5
do for [p in "rr static pshift clairvoyant"] {
  f = dir.'/intervals-'.p.'.csv'
  set title p
  plot f using 3:($5+$6+$7+$8+$9) with boxes lc rgb '#9467bd' title 'interval 5', \
       f using 3:($5+$6+$7+$8) with boxes lc rgb '#2ca02c' title 'interval 4', \
       f using 3:($5+$6+$7) with boxes lc rgb '#ff7f0e' title 'interval 3', \
       f using 3:($5+$6) with boxes lc rgb '#d62728' title 'interval 2', \
       f using 3:5 with boxes lc rgb '#1f77b4' title 'interval 1', \
       f using 3:4 with points pt 7 ps 0.4 lc rgb 'black' title 'reservation'
}
unset multiplot
set output dir.'/exp1-reservations.png'
set terminal pngcairo size 800,500 font ",10"
set title sprintf('Bucket reservations (IOs per QoS period), every %dth bucket', sample)
plot dir.'/intervals-pshift.csv' using 3:4 with linespoints pt 7 ps 0.5 notitle
