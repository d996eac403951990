#!/bin/bash
# One device run: real nvidia-smi outputs (idle and under a torch matmul load), then the gpu_health role.
cd "$(dirname "$0")"
export LC_ALL=C.UTF-8 PYTHONUNBUFFERED=1
F=index,uuid,name,pstate,clocks.sm,clocks.max.sm,power.draw,power.limit,utilization.gpu,temperature.gpu,memory.used
python3 --version; nvidia-smi -L
python3 -m pip install -q --no-index --no-deps --no-compile --target /tmp/site whl/*.whl || exit 1
export PYTHONPATH=/tmp/site
nvidia-smi > $OUT/smi_default_idle.txt
nvidia-smi --query-gpu=$F --format=csv > $OUT/smi_query_idle_header.csv
nvidia-smi -q -d PERFORMANCE > $OUT/smi_q_performance_idle.txt
python3 -c 'import time, torch
a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
end = time.time() + 20
while time.time() < end:
    a @ a
    torch.cuda.synchronize()' & pid=$!
sleep 10
for i in 1 2 3 4 5; do nvidia-smi --query-gpu=$F --format=csv,noheader,nounits >> $OUT/smi_query_load.csv; sleep 1; done
nvidia-smi -q -d PERFORMANCE > $OUT/smi_q_performance_load.txt
nvidia-smi --query-gpu=$F --format=csv >> $OUT/smi_query_load_header.csv
wait $pid
cat $OUT/smi_query_load.csv $OUT/smi_query_load_header.csv
grep -A12 "Clocks Event Reasons$" $OUT/smi_q_performance_load.txt
sleep 5
ANSIBLE_COLLECTIONS_PATH=$PWD python3 -m ansible playbook -i inventory.yml gpu_health_device.yml 2>&1 | tee $OUT/gpu_health_real.log
echo "playbook rc=${PIPESTATUS[0]}"
