#!/bin/sh
# add A B prints A+B
echo $(( $1 + $2 ))
