/* cuda.h for the SIMT emulator: everything lives in the prelude (simt_cuda.h). */
