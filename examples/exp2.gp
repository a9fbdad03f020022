# exp2.gp - Fig. 4 of the pShift paper from examples/exp2.sh output: % of buckets missing >= 5% of their reservation by N_D (clusters) and N_A (bars), one panel per policy.
# Usage: gnuplot -e "dir='out/exp2'; na=3" examples/exp2.gp   (reads dir/exp2-POLICY.dat)
if (!exists("dir")) dir = 'out/exp2'
if (!exists("na")) na = 3
set terminal pngcairo size 1400,1000 font ",10"
set output dir.'/exp2.png'
set multiplot layout 2,2 title "Buckets missing 5% or more of their reservation (mean over seeds)"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.9 border -1
set ylabel '% of buckets'
set xlabel 'demand changes per period (N_D)'
set key top left horizontal
set offsets 0,0,graph 0.12,0
set yrange [0:*]
do for [p in "rr static pshift clairvoyant"] {
  set title p
  plot for [i=2:na+1] dir.'/exp2-'.p.'.dat' using i:xtic(1) title columnheader(i)
}
unset multiplot
