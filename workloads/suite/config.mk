# Shared build settings for every kernel of the suite (included by each generated Makefile).
CC=gcc
CFLAGS=-O2 -DDUMP_ARRAYS
