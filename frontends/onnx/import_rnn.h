/* frontends/onnx/import_rnn.h: the recurrent operators of the ONNX importer (RNN, GRU, LSTM;
 * frontends/onnx/import_rnn.c), called by their handler onnx_do_rnn (at the end of
 * import_rnn.c) once it has the node's inputs as builder arguments. Internal header of
 * relaxc_core. */
#ifndef RX_ONNX_IMPORT_RNN_H
#define RX_ONNX_IMPORT_RNN_H

#include "../../ir/ir.h"

#include "proto.h"

/* A recurrent node's inputs in ONNX order: X, W, R, B, sequence_lens, initial_h, initial_c
 * (LSTM), P (LSTM); NULL where absent. xs, ws, rs: the struct info of X, W, R. */
typedef struct onnx_rnn_in {
  rx_node *x, *w, *r, *b, *seq, *h0, *c0, *p;
  const rx_sinfo *xs, *ws, *rs, *seqs;
} onnx_rnn_in;

/* Imports RNN, GRU or LSTM node n (n->op_type) over X's sequence length, symbolic or not:
 * out[0..2] become Y, Y_h and Y_c (Y_c: LSTM only; NULL for the others). A message without the
 * node's name (the caller adds it) where an attribute or input is not supported. */
rx_status onnx_rnn_import(rx_module *m, rx_builder *b, const Onnx__NodeProto *n,
                          const onnx_rnn_in *in, rx_var *out[3]);

#endif
