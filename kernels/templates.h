#pragma once

#include <string_view>

namespace lazycl::kernels {

// The text of kernels/templates/<name>, embedded at build time (cmake/embed_templates.cmake).
// Empty when there is no such template.
std::string_view EmbeddedTemplate(std::string_view name);

// Like EmbeddedTemplate, but a missing template is a bug (abort with its name).
std::string_view Template(std::string_view name);

}  // namespace lazycl::kernels
