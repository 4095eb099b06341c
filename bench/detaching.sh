# Sourced by the bench scripts. tokenscope leaves the removal of its probes to a child,
# tokenscope-det, that ends on its own: a measurement after a traced one waits until
# `detaching` fails, or the old probes would still trap there.
detaching() { ps -eo stat=,comm= | awk '$1 !~ /^Z/ && $2 == "tokenscope-det" { f = 1 } END { exit !f }'; }
