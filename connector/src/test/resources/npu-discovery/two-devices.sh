#!/bin/sh
# Test discovery: two devices, 0 and 1 (for the simulated CANN runtime; no NPU involved).
echo '{"name":"npu","addresses":["0","1"]}'
