#!/bin/sh
# Test discovery: a broken list that names device 0 twice.
echo '{"name":"npu","addresses":["0","0"]}'
