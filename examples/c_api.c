/* dvm from C11: a float16 activation through a linear layer and a softmax,
 * a mask, a reduction, a KV cache filled in two steps and read by causal
 * attention, and an error handled through its status and message. Exits 0 when every result matches a reference computed here. */
#include <dvm/dvm_c.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#define CHECK(call)                                                              \
  do {                                                                           \
    dvm_status s_ = (call);                                                      \
    if (s_ != DVM_OK) {                                                          \
      fprintf(stderr, "c_api: %s failed (%d): %s\n", #call, s_, dvm_last_error()); \
      return 1;                                                                  \
    }                                                                            \
  } while (0)

enum { ROWS = 4, IN = 8, OUT = 5 };

int main(void) {
  float x[ROWS * IN], w[OUT * IN], b[OUT];
  for (int i = 0; i < ROWS * IN; ++i) x[i] = (float)((i * 37) % 17) / 8.0f - 1.0f;
  for (int i = 0; i < OUT * IN; ++i) w[i] = (float)((i * 11) % 13) / 6.0f - 1.0f;
  for (int i = 0; i < OUT; ++i) b[i] = 0.25f * (float)i;

  const int64_t xs[2] = {ROWS, IN}, ws[2] = {OUT, IN}, bs[1] = {OUT};
  dvm_tensor tx, tw, tb, y, p, mask, count;
  CHECK(dvm_from_blob(x, xs, 2, DVM_F32, &tx));
  CHECK(dvm_from_copy(w, ws, 2, DVM_F32, &tw));
  CHECK(dvm_from_blob(b, bs, 1, DVM_F32, &tb));
  CHECK(dvm_linear(tx, tw, tb, &y));  /* y = x w^T + b: recorded, not computed */
  CHECK(dvm_softmax(y, -1, &p));
  CHECK(dvm_binary_scalar(DVM_GT, p, 0.2f, 0, &mask));
  CHECK(dvm_reduce(DVM_SUM, mask, NULL, 0, 0, &count));

  float probs[ROWS * OUT];
  int64_t n = 0; /* a sum of bool counts in int64, as torch's */
  CHECK(dvm_read_f32(p, probs, ROWS * OUT)); /* one flush computes what is pending */
  CHECK(dvm_read(count, DVM_I64, &n, sizeof n));

  /* The reference, in double. */
  double worst = 0.0;
  int above = 0;
  for (int r = 0; r < ROWS; ++r) {
    double z[OUT], mx = -1e300, sum = 0.0;
    for (int o = 0; o < OUT; ++o) {
      z[o] = b[o];
      for (int k = 0; k < IN; ++k) z[o] += (double)x[r * IN + k] * w[o * IN + k];
      if (z[o] > mx) mx = z[o];
    }
    for (int o = 0; o < OUT; ++o) sum += exp(z[o] - mx);
    for (int o = 0; o < OUT; ++o) {
      const double want = exp(z[o] - mx) / sum;
      const double err = fabs(probs[r * OUT + o] - want);
      if (err > worst) worst = err;
      above += probs[r * OUT + o] > 0.2f;
    }
  }
  if (worst > 1e-6 || n != above) {
    fprintf(stderr, "c_api: softmax error %g, mask count %lld (expected %d)\n", worst, (long long)n, above);
    return 1;
  }

  /* x's rows appended to a cache two at a time, then attention over them:
   * with is_causal the first query sees only the first key, so its output
   * is x's first row. */
  const int64_t cap[2] = {ROWS, IN}, half[2] = {ROWS / 2, IN};
  dvm_kv_cache cache;
  dvm_tensor first, second, all, att;
  CHECK(dvm_kv_cache_create(cap, 2, 0, DVM_F32, &cache));
  CHECK(dvm_from_blob(x, half, 2, DVM_F32, &first));
  CHECK(dvm_from_blob(x + ROWS / 2 * IN, half, 2, DVM_F32, &second));
  CHECK(dvm_kv_cache_append(cache, first, &all));
  dvm_release(all);
  CHECK(dvm_kv_cache_append(cache, second, &all));
  CHECK(dvm_scaled_dot_product_attention(all, all, all, NULL, 1, 0.0f, &att));
  float cached[ROWS * IN], att0[ROWS * IN];
  CHECK(dvm_read_f32(all, cached, ROWS * IN));
  CHECK(dvm_read_f32(att, att0, ROWS * IN));
  for (int i = 0; i < ROWS * IN; ++i) {
    if (cached[i] != x[i] || (i < IN && fabsf(att0[i] - x[i]) > 1e-6f)) {
      fprintf(stderr, "c_api: cache or attention differs at %d\n", i);
      return 1;
    }
  }
  dvm_release(att);
  dvm_release(all);
  dvm_release(second);
  dvm_release(first);
  dvm_kv_cache_destroy(cache);

  /* Bad input: a status and a message naming the op and the shapes. */
  dvm_tensor bad = NULL;
  const dvm_status s = dvm_matmul(tx, tx, &bad);
  if (s != DVM_ERROR || bad != NULL) {
    fprintf(stderr, "c_api: matmul of [4, 8] by [4, 8] did not fail\n");
    return 1;
  }
  printf("c_api: dvm %s, softmax(linear) max error %.3g, %d of %d above 0.2; error: %s\n", dvm_version(), worst, above,
         ROWS * OUT, dvm_last_error());

  dvm_release(count);
  dvm_release(mask);
  dvm_release(p);
  dvm_release(y);
  dvm_release(tb);
  dvm_release(tw);
  dvm_release(tx);
  return 0;
}
