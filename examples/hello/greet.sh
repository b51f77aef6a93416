#!/bin/sh
# The greet handler of examples/hello in POSIX sh, for a machine without
# Python:  flowd worker --handler greet='sh examples/hello/greet.sh'
#
# flowd runs it once per task: the step's input JSON arrives on stdin, and the
# JSON printed on stdout becomes the step's output. Exit status 100 fails the
# step for good; any other non-zero status fails the attempt, which is
# retried. What is printed on stderr becomes the error.
#
# Without jq, the name is picked out with sed: a name with a double quote or a
# backslash in it is refused.
input=$(cat)
name=$(printf '%s\n' "$input" | sed -n 's/.*"name"[[:space:]]*:[[:space:]]*"\([^"\\]*\)".*/\1/p')
if [ -z "$name" ]; then
	echo 'greet needs the input {"name": "..."} with no " or \ in the name' >&2
	exit 100
fi
printf '{"greeting": "Hello, %s!"}\n' "$name"
