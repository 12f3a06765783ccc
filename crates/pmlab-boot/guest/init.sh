#!/bin/busybox sh
# pmlab's guest init: stop the boot-time trace, copy the global buffer's raw pages and the
# files that decode them, the hotplug state names and the kernel log, and send them to the
# host through the virtio port named org.pmlab.out; then power off. Every line the host
# reads on the console starts with PMLAB-.
/bin/busybox mkdir -p /proc /sys /dev /tmp
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
T=/sys/kernel/tracing
mount -t tracefs tracefs $T 2>/dev/null
echo pmlab-init > $T/trace_marker 2>/dev/null
echo 0 > $T/tracing_on 2>/dev/null
echo "PMLAB-INIT $(cut -d' ' -f1 /proc/uptime)"
if grep -q pmlab.probe /proc/cmdline; then poweroff -f; fi
O=/tmp/pmlab
mkdir -p $O/trace/events $O/trace/per_cpu
if [ -r $T/set_event ]; then
  cp $T/events/header_page $T/events/header_event $O/trace/events/
  for f in trace_clock saved_cmdlines buffer_subbuf_size_kb; do
    [ -r $T/$f ] && cp $T/$f $O/trace/$f
  done
  for d in $T/events/ftrace/*/; do
    e=${d%/}; e=${e##*/}
    mkdir -p $O/trace/events/ftrace/$e && cp $d/format $O/trace/events/ftrace/$e/format 2>/dev/null
  done
  while IFS=: read s e; do
    mkdir -p $O/trace/events/$s/$e && cp $T/events/$s/$e/format $O/trace/events/$s/$e/format
  done < $T/set_event
  # trace_pipe_raw blocks once drained: read every CPU at once, and stop the readers when
  # no CPU has entries left.
  pids=
  for c in $T/per_cpu/cpu*; do
    n=${c##*/}
    mkdir -p $O/trace/per_cpu/$n
    cat $c/trace_pipe_raw > $O/trace/per_cpu/$n/trace_pipe_raw &
    pids="$pids $!"
  done
  i=0
  while [ $i -lt 500 ] && grep -q '^entries: [1-9]' $T/per_cpu/cpu*/stats; do
    usleep 20000
    i=$((i + 1))
  done
  usleep 200000
  kill $pids 2>/dev/null
  wait
  for c in $T/per_cpu/cpu*; do cp $c/stats $O/trace/per_cpu/${c##*/}/stats; done
fi
cp /sys/devices/system/cpu/hotplug/states $O/states 2>/dev/null
cat /sys/devices/system/cpu/online > $O/online
cat /sys/devices/system/cpu/possible > $O/possible
uname -s -n -r -m > $O/uname
dmesg > $O/dmesg
cd /tmp && tar czf /tmp/out.tgz pmlab
for n in /sys/class/virtio-ports/*/name; do
  if [ "$(cat $n)" = org.pmlab.out ]; then
    p=${n%/name}
    cat /tmp/out.tgz > /dev/${p##*/}
  fi
done
echo "PMLAB-DONE $(wc -c < /tmp/out.tgz)"
poweroff -f
