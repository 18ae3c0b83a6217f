# Shared build rules of every kernel of the suite (each kernel's Makefile sets EXECUTABLE and
# CUFILES, then includes this file). No -arch on purpose: the binary carries the default machine
# code plus PTX, which the driver compiles at run time on a newer GPU.
NVCC ?= nvcc
NVCCFLAGS ?= -O3

all: ${EXECUTABLE}

${EXECUTABLE}: ${CUFILES} $(wildcard *.cuh) ${PATH_TO_UTILS}/polybenchUtilFuncts.h
	${NVCC} ${NVCCFLAGS} ${CUFILES} -I${PATH_TO_UTILS} -o ${EXECUTABLE}

clean:
	rm -f *~ ${EXECUTABLE}

.PHONY: all clean
