//! The second file set of `waas-3g`: Office Open XML documents (`.docx`,
//! `.xlsx`, `.pptx`), the format of every Office since 2007.
//!
//! An OOXML file is a zip archive of XML parts (content types,
//! relationships, the document, its styles and properties) and media,
//! each part deflated (ECMA-376 Part 2, Open Packaging Conventions). What
//! matters to a WAN optimizer is that shape: the payload is already
//! compressed, and an edit (a line inserted in the middle of the text, a
//! cell changed) changes the deflated part from the edit to its end, its
//! CRC and the archive's directory, while the other parts (styles,
//! pictures) are unchanged byte for byte. The generator writes such
//! archives itself (a zip writer and `flate2`'s deflate), deterministic for
//! a seed and an edit generation, so the lab needs nothing outside the
//! build to produce them; sizes are exact: a stored thumbnail
//! (`docProps/thumbnail.jpeg`, as Office writes one) takes up the rest.

use std::io::Write as _;

use super::compound::picture;
use super::text::{sentence, PLACES};
use crate::rng::{hash_name, mix, Rng};

/// Which OOXML document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Document {
    /// A Word document (`.docx`): paragraphs, headings, a few pictures.
    Word,
    /// An Excel workbook (`.xlsx`): a sheet of figures and labels.
    Excel,
    /// A PowerPoint presentation (`.pptx`): slides of bullets, pictures.
    PowerPoint,
}

/// One part of the package.
struct Part {
    name: String,
    data: Vec<u8>,
    deflate: bool,
}

fn part(name: impl Into<String>, data: Vec<u8>) -> Part {
    Part {
        name: name.into(),
        data,
        deflate: true,
    }
}

/// Bytes of the local header and central directory entry of a part
/// beyond its data and its name (which both carry).
const ENTRY_OVERHEAD: usize = 30 + 46;
/// The thumbnail's part name.
const THUMBNAIL: &str = "docProps/thumbnail.jpeg";

fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

fn deflate(data: &[u8]) -> Vec<u8> {
    let mut encoder =
        flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
    // Writing to a Vec cannot fail.
    let _ = encoder.write_all(data);
    encoder.finish().unwrap_or_default()
}

/// A zip archive of `parts` (APPNOTE.TXT 4.3: local headers and data, the
/// central directory, the end record), timestamps fixed at 1980-01-01.
fn zip(parts: &[Part]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut central = Vec::new();
    for p in parts {
        let stored = if p.deflate {
            deflate(&p.data)
        } else {
            p.data.clone()
        };
        let crc = crc32fast::hash(&p.data);
        let offset = out.len() as u32;
        let method: u16 = if p.deflate { 8 } else { 0 };
        let name = p.name.as_bytes();
        // Local file header.
        put_u32(&mut out, 0x0403_4b50);
        put_u16(&mut out, 20);
        put_u16(&mut out, 0);
        put_u16(&mut out, method);
        put_u16(&mut out, 0);
        put_u16(&mut out, 0x0021);
        put_u32(&mut out, crc);
        put_u32(&mut out, stored.len() as u32);
        put_u32(&mut out, p.data.len() as u32);
        put_u16(&mut out, name.len() as u16);
        put_u16(&mut out, 0);
        out.extend_from_slice(name);
        out.extend_from_slice(&stored);
        // Its central directory entry.
        put_u32(&mut central, 0x0201_4b50);
        put_u16(&mut central, 20);
        put_u16(&mut central, 20);
        put_u16(&mut central, 0);
        put_u16(&mut central, method);
        put_u16(&mut central, 0);
        put_u16(&mut central, 0x0021);
        put_u32(&mut central, crc);
        put_u32(&mut central, stored.len() as u32);
        put_u32(&mut central, p.data.len() as u32);
        put_u16(&mut central, name.len() as u16);
        put_u16(&mut central, 0);
        put_u16(&mut central, 0);
        put_u16(&mut central, 0);
        put_u16(&mut central, 0);
        put_u32(&mut central, 0);
        put_u32(&mut central, offset);
        central.extend_from_slice(name);
    }
    let directory_offset = out.len() as u32;
    let directory_len = central.len() as u32;
    out.extend_from_slice(&central);
    put_u32(&mut out, 0x0605_4b50);
    put_u16(&mut out, 0);
    put_u16(&mut out, 0);
    put_u16(&mut out, parts.len() as u16);
    put_u16(&mut out, parts.len() as u16);
    put_u32(&mut out, directory_len);
    put_u32(&mut out, directory_offset);
    put_u16(&mut out, 0);
    out
}

const XML_HEAD: &str = "<?xml version=\"1.0\" encoding=\"UTF-8\" standalone=\"yes\"?>\r\n";

fn escape(text: &[u8]) -> String {
    String::from_utf8_lossy(text)
        .replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn content_types(overrides: &[(&str, &str)]) -> Vec<u8> {
    let mut x = format!(
        "{XML_HEAD}<Types xmlns=\"http://schemas.openxmlformats.org/package/2006/content-types\">\
         <Default Extension=\"rels\" ContentType=\"application/vnd.openxmlformats-package.relationships+xml\"/>\
         <Default Extension=\"xml\" ContentType=\"application/xml\"/>\
         <Default Extension=\"jpeg\" ContentType=\"image/jpeg\"/>"
    );
    for (name, kind) in overrides {
        x.push_str(&format!(
            "<Override PartName=\"/{name}\" ContentType=\"application/vnd.openxmlformats-{kind}\"/>"
        ));
    }
    x.push_str(
        "<Override PartName=\"/docProps/core.xml\" ContentType=\"application/vnd.openxmlformats-package.core-properties+xml\"/>\
         <Override PartName=\"/docProps/app.xml\" ContentType=\"application/vnd.openxmlformats-officedocument.extended-properties+xml\"/>\
         </Types>",
    );
    x.into_bytes()
}

fn relationships(rels: &[(&str, &str)]) -> Vec<u8> {
    let mut x = format!(
        "{XML_HEAD}<Relationships xmlns=\"http://schemas.openxmlformats.org/package/2006/relationships\">"
    );
    for (i, (kind, target)) in rels.iter().enumerate() {
        let kind = if kind.starts_with("http") {
            kind.to_string()
        } else {
            format!("http://schemas.openxmlformats.org/officeDocument/2006/relationships/{kind}")
        };
        x.push_str(&format!(
            "<Relationship Id=\"rId{}\" Type=\"{kind}\" Target=\"{target}\"/>",
            i + 1
        ));
    }
    x.push_str("</Relationships>");
    x.into_bytes()
}

fn package_rels(main: &str) -> Vec<u8> {
    relationships(&[
        ("officeDocument", main),
        (
            "http://schemas.openxmlformats.org/package/2006/relationships/metadata/core-properties",
            "docProps/core.xml",
        ),
        ("extended-properties", "docProps/app.xml"),
        (
            "http://schemas.openxmlformats.org/package/2006/relationships/metadata/thumbnail",
            THUMBNAIL,
        ),
    ])
}

fn properties(rng: &mut Rng, title: &str, application: &str, generation: u64) -> [Part; 2] {
    let author = PLACES[rng.below(PLACES.len() as u64) as usize];
    let core = format!(
        "{XML_HEAD}<cp:coreProperties xmlns:cp=\"http://schemas.openxmlformats.org/package/2006/metadata/core-properties\" \
         xmlns:dc=\"http://purl.org/dc/elements/1.1/\" xmlns:dcterms=\"http://purl.org/dc/terms/\" \
         xmlns:xsi=\"http://www.w3.org/2001/XMLSchema-instance\"><dc:title>{title}</dc:title>\
         <dc:creator>{author} office</dc:creator><cp:lastModifiedBy>{author} office</cp:lastModifiedBy>\
         <cp:revision>{}</cp:revision><dcterms:created xsi:type=\"dcterms:W3CDTF\">2009-03-02T09:00:00Z</dcterms:created>\
         <dcterms:modified xsi:type=\"dcterms:W3CDTF\">2009-03-{:02}T10:{:02}:00Z</dcterms:modified></cp:coreProperties>",
        generation + 1,
        2 + generation % 27,
        generation % 60
    );
    let app = format!(
        "{XML_HEAD}<Properties xmlns=\"http://schemas.openxmlformats.org/officeDocument/2006/extended-properties\">\
         <Application>{application}</Application><DocSecurity>0</DocSecurity><Company>{author} branch</Company>\
         <AppVersion>12.0000</AppVersion></Properties>"
    );
    [
        part("docProps/core.xml", core.into_bytes()),
        part("docProps/app.xml", app.into_bytes()),
    ]
}

/// Boilerplate styles of the kind every document carries (the same in
/// every file of a kind: what a byte cache finds again across files).
fn styles(root: &str, namespace: &str, count: usize) -> Vec<u8> {
    let mut x = format!("{XML_HEAD}<{root} xmlns=\"{namespace}\">");
    for i in 0..count {
        x.push_str(&format!(
            "<style type=\"paragraph\" styleId=\"Style{i}\"><name val=\"Style {i}\"/><basedOn val=\"Normal\"/>\
             <pPr><spacing before=\"{}\" after=\"{}\" line=\"276\" lineRule=\"auto\"/></pPr>\
             <rPr><rFonts ascii=\"Calibri\" hAnsi=\"Calibri\"/><sz val=\"{}\"/></rPr></style>",
            i * 20 % 240,
            i * 40 % 200,
            18 + i % 10 * 2
        ));
    }
    x.push_str(&format!("</{root}>"));
    x.into_bytes()
}

/// A paragraph of several sentences, escaped for XML.
fn paragraph(rng: &mut Rng) -> String {
    let mut text = Vec::new();
    for i in 0..rng.range(2, 6) {
        if i > 0 {
            text.push(b' ');
        }
        sentence(rng, &mut text);
    }
    escape(&text)
}

/// The edit of generation `generation`: a line a user inserts.
fn inserted_line(generation: u64) -> String {
    format!("Revision {generation}: figures checked against the regional report and updated.")
}

fn word_parts(rng: &mut Rng, budget: usize, generation: u64) -> Vec<Part> {
    let w = "http://schemas.openxmlformats.org/wordprocessingml/2006/main";
    // About a third pictures, the rest text (deflated XML is about a fifth
    // of its size).
    let pictures = budget / 3;
    let text_raw = (budget - pictures) * 5;
    let mut paragraphs = Vec::new();
    let mut raw = 0;
    while raw < text_raw {
        let p = if rng.chance(0.08) {
            format!(
                "<w:p><w:pPr><w:pStyle w:val=\"Heading{}\"/></w:pPr><w:r><w:t>{}</w:t></w:r></w:p>",
                rng.range(1, 3),
                paragraph(rng).split('.').next().unwrap_or("Summary")
            )
        } else {
            format!(
                "<w:p><w:pPr><w:pStyle w:val=\"Style{}\"/></w:pPr><w:r><w:rPr><w:lang w:val=\"en-US\"/></w:rPr>\
                 <w:t xml:space=\"preserve\">{}</w:t></w:r></w:p>",
                rng.below(12),
                paragraph(rng)
            )
        };
        raw += p.len();
        paragraphs.push(p);
    }
    if generation > 0 {
        let middle = paragraphs.len() / 2;
        paragraphs.insert(
            middle,
            format!(
                "<w:p><w:r><w:t xml:space=\"preserve\">{}</w:t></w:r></w:p>",
                inserted_line(generation)
            ),
        );
    }
    let count = (pictures / 60_000).clamp(1, 12);
    let mut parts = Vec::new();
    let mut rels = vec![("styles", "styles.xml".to_string())];
    for i in 1..=count {
        rels.push(("image", format!("media/image{i}.jpeg")));
        parts.push(part(
            format!("word/media/image{i}.jpeg"),
            picture(rng, pictures / count),
        ));
        let at = paragraphs.len() * i / (count + 1);
        paragraphs.insert(
            at,
            format!(
                "<w:p><w:r><w:drawing><wp:inline xmlns:wp=\"http://schemas.openxmlformats.org/drawingml/2006/wordprocessingDrawing\">\
                 <wp:extent cx=\"5486400\" cy=\"3200400\"/><wp:docPr id=\"{i}\" name=\"Picture {i}\"/>\
                 <a:graphic xmlns:a=\"http://schemas.openxmlformats.org/drawingml/2006/main\"><a:graphicData>\
                 <a:blip r:embed=\"rId{}\"/></a:graphicData></a:graphic></wp:inline></w:drawing></w:r></w:p>",
                i + 1
            ),
        );
    }
    let document = format!(
        "{XML_HEAD}<w:document xmlns:w=\"{w}\" xmlns:r=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships\">\
         <w:body>{}<w:sectPr><w:pgSz w:w=\"12240\" w:h=\"15840\"/></w:sectPr></w:body></w:document>",
        paragraphs.concat()
    );
    let rels: Vec<(&str, &str)> = rels.iter().map(|(k, t)| (*k, t.as_str())).collect();
    parts.push(part("word/document.xml", document.into_bytes()));
    parts.push(part("word/styles.xml", styles("w:styles", w, 40)));
    parts.push(part("word/_rels/document.xml.rels", relationships(&rels)));
    parts.push(part(
        "[Content_Types].xml",
        content_types(&[
            (
                "word/document.xml",
                "officedocument.wordprocessingml.document.main+xml",
            ),
            (
                "word/styles.xml",
                "officedocument.wordprocessingml.styles+xml",
            ),
        ]),
    ));
    parts.push(part("_rels/.rels", package_rels("word/document.xml")));
    parts
}

fn column(mut i: usize) -> String {
    let mut name = Vec::new();
    loop {
        name.push(b'A' + (i % 26) as u8);
        if i < 26 {
            break;
        }
        i = i / 26 - 1;
    }
    name.reverse();
    String::from_utf8_lossy(&name).into_owned()
}

fn excel_parts(rng: &mut Rng, budget: usize, generation: u64) -> Vec<Part> {
    // Figures in XML deflate to about a sixth.
    let raw_target = budget * 6;
    let columns = 14;
    let labels: Vec<String> = (0..60)
        .map(|i| {
            let mut t = Vec::new();
            sentence(rng, &mut t);
            let words: Vec<&[u8]> = t.split(|b| *b == b' ').take(3).collect();
            format!("{} {i}", escape(&words.join(&b' ')))
        })
        .collect();
    let mut rows = Vec::new();
    let mut raw = 0;
    let mut r = 1;
    while raw < raw_target {
        let mut row = format!("<row r=\"{r}\" spans=\"1:{columns}\">");
        row.push_str(&format!(
            "<c r=\"A{r}\" t=\"s\"><v>{}</v></c>",
            rng.zipf(labels.len())
        ));
        for c in 1..columns {
            let value = if rng.chance(0.3) {
                rng.range(0, 5000).to_string()
            } else {
                format!("{}.{:02}", rng.range(0, 99_999), rng.below(100))
            };
            row.push_str(&format!(
                "<c r=\"{}{r}\" s=\"{}\"><v>{value}</v></c>",
                column(c),
                1 + c % 3
            ));
        }
        row.push_str("</row>");
        raw += row.len();
        rows.push(row);
        r += 1;
    }
    // The edit: a figure in the middle row changed.
    if generation > 0 {
        let middle = rows.len() / 2;
        if let Some(row) = rows.get_mut(middle) {
            let cell = format!("<c r=\"{}{}\"", column(5), middle + 1);
            let value = row.find(&cell).and_then(|at| {
                let start = at + row[at..].find("<v>")? + 3;
                let end = start + row[start..].find("</v>")?;
                Some((start, end))
            });
            if let Some((start, end)) = value {
                row.replace_range(start..end, &format!("{}.25", 1000 + generation));
            }
        }
    }
    let main = "http://schemas.openxmlformats.org/spreadsheetml/2006/main";
    let sheet = format!(
        "{XML_HEAD}<worksheet xmlns=\"{main}\"><dimension ref=\"A1:{}{}\"/><sheetData>{}</sheetData></worksheet>",
        column(columns - 1),
        rows.len(),
        rows.concat()
    );
    let strings = format!(
        "{XML_HEAD}<sst xmlns=\"{main}\" count=\"{0}\" uniqueCount=\"{0}\">{1}</sst>",
        labels.len(),
        labels
            .iter()
            .map(|l| format!("<si><t>{l}</t></si>"))
            .collect::<String>()
    );
    let workbook = format!(
        "{XML_HEAD}<workbook xmlns=\"{main}\" xmlns:r=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships\">\
         <sheets><sheet name=\"Figures\" sheetId=\"1\" r:id=\"rId1\"/></sheets></workbook>"
    );
    vec![
        part("xl/worksheets/sheet1.xml", sheet.into_bytes()),
        part("xl/sharedStrings.xml", strings.into_bytes()),
        part("xl/styles.xml", styles("styleSheet", main, 24)),
        part("xl/workbook.xml", workbook.into_bytes()),
        part(
            "xl/_rels/workbook.xml.rels",
            relationships(&[
                ("worksheet", "worksheets/sheet1.xml"),
                ("sharedStrings", "sharedStrings.xml"),
                ("styles", "styles.xml"),
            ]),
        ),
        part(
            "[Content_Types].xml",
            content_types(&[
                (
                    "xl/workbook.xml",
                    "officedocument.spreadsheetml.sheet.main+xml",
                ),
                (
                    "xl/worksheets/sheet1.xml",
                    "officedocument.spreadsheetml.worksheet+xml",
                ),
                (
                    "xl/sharedStrings.xml",
                    "officedocument.spreadsheetml.sharedStrings+xml",
                ),
                ("xl/styles.xml", "officedocument.spreadsheetml.styles+xml"),
            ]),
        ),
        part("_rels/.rels", package_rels("xl/workbook.xml")),
    ]
}

fn powerpoint_parts(rng: &mut Rng, budget: usize, generation: u64) -> Vec<Part> {
    let p = "http://schemas.openxmlformats.org/presentationml/2006/main";
    // Mostly pictures, as in real decks.
    let slides = (budget / 40_000).clamp(3, 40);
    let picture_bytes = budget * 3 / 4 / slides;
    let mut parts = Vec::new();
    let mut list = String::new();
    let mut overrides = vec![(
        "ppt/presentation.xml".to_string(),
        "officedocument.presentationml.presentation.main+xml",
    )];
    let mut rels = Vec::new();
    for s in 1..=slides {
        let mut bullets = String::new();
        for _ in 0..rng.range(3, 7) {
            bullets.push_str(&format!(
                "<a:p><a:r><a:t>{}</a:t></a:r></a:p>",
                paragraph(rng).split(". ").next().unwrap_or("")
            ));
        }
        if generation > 0 && s == slides / 2 + 1 {
            bullets.push_str(&format!(
                "<a:p><a:r><a:t>{}</a:t></a:r></a:p>",
                inserted_line(generation)
            ));
        }
        let slide = format!(
            "{XML_HEAD}<p:sld xmlns:p=\"{p}\" xmlns:a=\"http://schemas.openxmlformats.org/drawingml/2006/main\" \
             xmlns:r=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships\"><p:cSld><p:spTree>\
             <p:sp><p:nvSpPr><p:cNvPr id=\"2\" name=\"Title {s}\"/></p:nvSpPr><p:txBody><a:p><a:r><a:t>{} {s}</a:t></a:r></a:p></p:txBody></p:sp>\
             <p:sp><p:nvSpPr><p:cNvPr id=\"3\" name=\"Content {s}\"/></p:nvSpPr><p:txBody>{bullets}</p:txBody></p:sp>\
             <p:pic><p:nvPicPr><p:cNvPr id=\"4\" name=\"Picture {s}\"/></p:nvPicPr><p:blipFill><a:blip r:embed=\"rId1\"/></p:blipFill></p:pic>\
             </p:spTree></p:cSld></p:sld>",
            PLACES[rng.below(PLACES.len() as u64) as usize]
        );
        parts.push(part(format!("ppt/slides/slide{s}.xml"), slide.into_bytes()));
        parts.push(part(
            format!("ppt/slides/_rels/slide{s}.xml.rels"),
            relationships(&[("image", &format!("../media/image{s}.jpeg"))]),
        ));
        parts.push(part(
            format!("ppt/media/image{s}.jpeg"),
            picture(rng, picture_bytes),
        ));
        list.push_str(&format!("<p:sldId id=\"{}\" r:id=\"rId{s}\"/>", 255 + s));
        rels.push(format!("slides/slide{s}.xml"));
        overrides.push((
            format!("ppt/slides/slide{s}.xml"),
            "officedocument.presentationml.slide+xml",
        ));
    }
    let presentation = format!(
        "{XML_HEAD}<p:presentation xmlns:p=\"{p}\" xmlns:r=\"http://schemas.openxmlformats.org/officeDocument/2006/relationships\">\
         <p:sldIdLst>{list}</p:sldIdLst><p:sldSz cx=\"9144000\" cy=\"6858000\"/></p:presentation>"
    );
    let rels: Vec<(&str, &str)> = rels.iter().map(|t| ("slide", t.as_str())).collect();
    let overrides: Vec<(&str, &str)> = overrides.iter().map(|(n, k)| (n.as_str(), *k)).collect();
    parts.push(part("ppt/presentation.xml", presentation.into_bytes()));
    parts.push(part(
        "ppt/_rels/presentation.xml.rels",
        relationships(&rels),
    ));
    parts.push(part("[Content_Types].xml", content_types(&overrides)));
    parts.push(part("_rels/.rels", package_rels("ppt/presentation.xml")));
    parts
}

/// The document `name` of `kind`, exactly `size` bytes for generation 0
/// (a later generation carries its edit and may differ by a few bytes);
/// the same `seed`, name and generation always give the same bytes.
pub fn generate(kind: Document, name: &str, size: usize, seed: u64, generation: u64) -> Vec<u8> {
    let base = mix(seed) ^ hash_name(name.as_bytes());
    let mut budget = size * 9 / 10;
    let mut last = Vec::new();
    for _ in 0..12 {
        // The same streams for every generation: the edit is the only change.
        let mut rng = Rng::new(base);
        let mut parts = match kind {
            Document::Word => word_parts(&mut rng, budget, generation),
            Document::Excel => excel_parts(&mut rng, budget, generation),
            Document::PowerPoint => powerpoint_parts(&mut rng, budget, generation),
        };
        let (application, title) = match kind {
            Document::Word => ("Microsoft Office Word", "Quarterly report"),
            Document::Excel => ("Microsoft Excel", "Regional figures"),
            Document::PowerPoint => ("Microsoft Office PowerPoint", "Branch review"),
        };
        parts.extend(properties(&mut rng, title, application, generation));
        // The size without the thumbnail at generation 0 sets its length,
        // so that every generation keeps the same thumbnail bytes.
        let unpadded = if generation == 0 {
            zip(&parts).len()
        } else {
            let mut rng = Rng::new(base);
            let mut first = match kind {
                Document::Word => word_parts(&mut rng, budget, 0),
                Document::Excel => excel_parts(&mut rng, budget, 0),
                Document::PowerPoint => powerpoint_parts(&mut rng, budget, 0),
            };
            first.extend(properties(&mut rng, title, application, 0));
            zip(&first).len()
        };
        let overhead = ENTRY_OVERHEAD + 2 * THUMBNAIL.len();
        let mut thumbnail_rng = Rng::new(mix(base ^ 0x0074_6875_6d62));
        match size.checked_sub(unpadded + overhead) {
            Some(len) => {
                parts.push(Part {
                    name: THUMBNAIL.into(),
                    data: picture(&mut thumbnail_rng, len),
                    deflate: false,
                });
                return zip(&parts);
            }
            None => {
                last = zip(&parts);
                budget = budget * 4 / 5;
            }
        }
    }
    last
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Bytes of the end-of-central-directory record.
    const END_RECORD: usize = 22;

    /// Reads a stored archive back: every local header's name, method,
    /// CRC and sizes agree with its data and the central directory.
    fn parts_of(zip: &[u8]) -> Vec<(String, Vec<u8>)> {
        let u16_at = |i: usize| u16::from_le_bytes([zip[i], zip[i + 1]]) as usize;
        let u32_at =
            |i: usize| u32::from_le_bytes([zip[i], zip[i + 1], zip[i + 2], zip[i + 3]]) as usize;
        let end = zip.len() - END_RECORD;
        assert_eq!(u32_at(end), 0x0605_4b50);
        let count = u16_at(end + 10);
        let mut at = u32_at(end + 16);
        let mut out = Vec::new();
        for _ in 0..count {
            assert_eq!(u32_at(at), 0x0201_4b50);
            let offset = u32_at(at + 42);
            let name_len = u16_at(at + 28);
            let name = String::from_utf8_lossy(&zip[at + 46..at + 46 + name_len]).into_owned();
            assert_eq!(u32_at(offset), 0x0403_4b50);
            let method = u16_at(offset + 8);
            let crc = u32_at(offset + 14) as u32;
            let stored = u32_at(offset + 18);
            let len = u32_at(offset + 22);
            let data_at = offset + 30 + u16_at(offset + 26);
            let raw = &zip[data_at..data_at + stored];
            let data = if method == 8 {
                let mut d = flate2::read::DeflateDecoder::new(raw);
                let mut v = Vec::new();
                std::io::Read::read_to_end(&mut d, &mut v)
                    .map(|_| v)
                    .unwrap_or_default()
            } else {
                raw.to_vec()
            };
            assert_eq!(data.len(), len, "{name}");
            assert_eq!(crc32fast::hash(&data), crc, "{name}");
            out.push((name, data));
            at += 46 + name_len;
        }
        out
    }

    #[test]
    fn documents_are_valid_archives_of_the_exact_size() {
        for (kind, name, size) in [
            (Document::Word, "40K.docx", 40_000),
            (Document::Excel, "80K.xlsx", 80_000),
            (Document::PowerPoint, "300K.pptx", 300_000),
        ] {
            let doc = generate(kind, name, size, 4, 0);
            assert_eq!(doc.len(), size, "{name}");
            assert_eq!(doc, generate(kind, name, size, 4, 0));
            let parts = parts_of(&doc);
            let names: Vec<&str> = parts.iter().map(|(n, _)| n.as_str()).collect();
            assert!(names.contains(&"[Content_Types].xml"), "{names:?}");
            assert!(names.contains(&"_rels/.rels") && names.contains(&THUMBNAIL));
        }
    }

    /// An edit changes the document's text part and nothing else but the
    /// properties; the pictures and the thumbnail stay byte for byte.
    /// A workbook's edit changes one figure in the middle of the sheet:
    /// the sheet's XML is the same up to it.
    #[test]
    fn a_workbook_edit_is_in_the_middle_of_the_sheet() {
        let sheet = |generation| {
            parts_of(&generate(
                Document::Excel,
                "80K.xlsx",
                80_000,
                4,
                generation,
            ))
            .into_iter()
            .find(|(n, _)| n == "xl/worksheets/sheet1.xml")
            .map(|(_, d)| d)
            .unwrap_or_default()
        };
        let (before, after) = (sheet(0), sheet(3));
        assert!(before.len().abs_diff(after.len()) < 10);
        let first = before.iter().zip(&after).position(|(a, b)| a != b);
        let first = first.unwrap_or(before.len());
        assert!(
            first > before.len() * 2 / 5 && first < before.len() * 3 / 5,
            "{first}"
        );
        assert!(String::from_utf8_lossy(&after).contains("<v>1003.25</v>"));
    }

    #[test]
    fn an_edit_inserts_a_line_and_keeps_the_other_parts() {
        let before = parts_of(&generate(Document::Word, "300K.docx", 300_000, 4, 0));
        let after = parts_of(&generate(Document::Word, "300K.docx", 300_000, 4, 7));
        assert_eq!(before.len(), after.len());
        for ((name, a), (name_b, b)) in before.iter().zip(&after) {
            assert_eq!(name, name_b);
            let changes = name == "word/document.xml" || name.starts_with("docProps/c");
            assert_eq!(a != b, changes, "{name}");
            if name == "word/document.xml" {
                let text = String::from_utf8_lossy(b);
                assert!(text.contains(&inserted_line(7)));
            }
        }
    }
}
