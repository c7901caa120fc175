// The API's volumes (issue 41): a project's named volumes, made, listed,
// shown and deleted; sandboxes mount them at creation ("volumes": [{"name",
// "path", "readonly"}]). A token sees its own project's only; another
// project's volume answers 404 as an unknown one does.
#include <nlohmann/json.hpp>

#include "api/api.h"
#include "api/json_answers.h"

namespace rf::api {
using nlohmann::json;

void Api::volumes_create(Ctx& c) {
  auto body = body_object(c.request, c.out);
  if (!body) return;
  auto made = sandboxes_.create_volume(c.who.project, c.who.actor(), *body);
  if (auto* e = std::get_if<ServiceError>(&made)) {
    if (e->status == 403) ++denied_;
    return fail(c.out, e->status, e->field, e->message);
  }
  const json& v = std::get<json>(made);
  answer(c.out, 201, v, {{"Location", "/v1/volumes/" + v.value("name", "")}});
}

void Api::volumes_list(Ctx& c) {
  auto all = sandboxes_.volumes(c.who.project);
  if (auto* e = std::get_if<ServiceError>(&all))
    return fail(c.out, e->status, e->field, e->message);
  answer(c.out, 200, std::get<json>(all));
}

void Api::volume_get(Ctx& c) {
  auto v = sandboxes_.volume(c.who.project, c.param("name"));
  if (auto* e = std::get_if<ServiceError>(&v)) return fail(c.out, e->status, e->field, e->message);
  answer(c.out, 200, std::get<json>(v));
}

void Api::volume_delete(Ctx& c) {
  auto gone = sandboxes_.delete_volume(c.who.project, c.param("name"), c.who.actor());
  if (auto* e = std::get_if<ServiceError>(&gone)) {
    return fail(c.out, e->status, e->field, e->message);
  }
  (void)c.out.respond(204, "", "");
}

}  // namespace rf::api
