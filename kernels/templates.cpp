#include "kernels/templates.h"

#include <string>

#include "base/check.h"

namespace lazycl::kernels {

std::string_view Template(std::string_view name) {
  std::string_view text = EmbeddedTemplate(name);
  LAZYCL_CHECK(!text.empty(), "kernel template %s is not embedded", std::string(name).c_str());
  return text;
}

}  // namespace lazycl::kernels
