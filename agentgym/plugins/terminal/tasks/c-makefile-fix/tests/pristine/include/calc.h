#ifndef CALC_H
#define CALC_H

/* Parses a decimal number; returns 0 on success, -1 if text is not a number. */
int parse_number(const char *text, double *out);

/* Applies op ("add", "sub", "mul", "div", "pow", "hyp") to a and b.
   Returns 0 on success, -1 for an unknown op. */
int apply(const char *op, double a, double b, double *out);

#endif
