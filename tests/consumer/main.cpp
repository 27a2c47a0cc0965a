// Built against the installed package only: the public headers must stand alone.
#include <lazycl/lazycl.h>

#include <cstdio>

int main() {
  lazycl::Tensor x = lazycl::tensor(std::vector<float>{1, 2, 3}, {3});
  float total = lazycl::sum(x * 2).item<float>();
  std::printf("consumer: sum = %g\n", total);
  try {
    lazycl::reshape(x, {2, 2});
  } catch (const lazycl::Error& e) {
    std::printf("consumer: error as expected: %s\n", e.what());
    return total == 12.0f ? 0 : 1;
  }
  return 1;
}
