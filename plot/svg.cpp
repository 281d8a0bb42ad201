// SVG writer for plot::Chart: the laid-out Scene as SVG 1.1 elements, coordinates to 0.01 px.
#include "plot/chart.h"

#include <fmt/format.h>

namespace k3::plot {

namespace {

std::string escape(const std::string& text) {
  std::string out;
  for (char ch : text) {
    switch (ch) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      default: out += ch;
    }
  }
  return out;
}

const char* anchor_name(Scene::Anchor a) {
  switch (a) {
    case Scene::Anchor::start: return "start";
    case Scene::Anchor::middle: return "middle";
    case Scene::Anchor::end: return "end";
  }
  return "start";
}

}  // namespace

std::string to_svg(const Chart& chart) {
  const Scene s = layout(chart);
  std::string out = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n"
      "<rect x=\"0\" y=\"0\" width=\"{0}\" height=\"{1}\" fill=\"#FFFFFF\"/>\n",
      s.width_px, s.height_px);
  for (const Scene::Line& l : s.lines) {
    out += fmt::format(
        "<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"{}\" stroke-width=\"{}\"/>\n", l.x1,
        l.y1, l.x2, l.y2, l.color, l.width);
  }
  for (const Scene::Polyline& p : s.polylines) {
    out += "<polyline fill=\"none\" stroke=\"" + p.color + "\" stroke-width=\"" + fmt::format("{}", p.width) +
           "\" stroke-linejoin=\"round\" points=\"";
    for (std::size_t i = 0; i < p.points.size(); ++i) {
      out += fmt::format("{}{:.2f},{:.2f}", i ? " " : "", p.points[i].first, p.points[i].second);
    }
    out += "\"/>\n";
  }
  for (const Scene::Marker& m : s.markers) {
    out += fmt::format("<circle cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"{}\" fill=\"{}\"/>\n", m.x, m.y, m.radius, m.color);
  }
  for (const Scene::Text& t : s.texts) {
    const std::string rotate = t.vertical ? fmt::format(" transform=\"rotate(-90 {:.2f} {:.2f})\"", t.x, t.y) : "";
    out += fmt::format(
        "<text x=\"{:.2f}\" y=\"{:.2f}\" font-size=\"{}\" text-anchor=\"{}\"{}{} fill=\"#222222\">{}</text>\n", t.x,
        t.y, t.size_px, anchor_name(t.anchor), t.bold ? " font-weight=\"bold\"" : "", rotate, escape(t.text));
  }
  out += "</svg>\n";
  return out;
}

}  // namespace k3::plot
